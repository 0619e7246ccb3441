#!/usr/bin/env Rscript
# gengen_analyse.R -- gengen's per-run partial-correlation analysis, computed in R.
#
# Usage:
#   Rscript R/gengen_analyse.R scores.csv out.csv [--id TESTSET] [--ood A,B,...] [--metric acc]
#           [--method pearson|spearman|kendall] [--adjust holm] [--fit linear|gam]
#
#   scores.csv  gengen's long score table (e.g. `gengen export`); needs at least the columns
#               model, run, step, testset, metric, value. Other columns are ignored.
#   out.csv     one row per (model, run) x unordered pair of OOD test sets, with gengen's pairs-table columns:
#               model, run, testset_a, testset_b, metric, n, k, r_raw, r_partial, statistic, df, p_value,
#               p_adjusted, fit, method, inference, backend, edf_a, edf_b
#
# Options (defaults in brackets):
#   --id       the in-domain test set whose score is controlled for [lambada_openai]
#   --ood      comma-separated OOD test sets [every test set of the metric except --id]
#   --metric   the metric to analyse [acc]
#   --method   pearson | spearman | kendall [pearson]
#   --adjust   a p.adjust method: holm, hochberg, hommel, bonferroni, BH, BY, fdr, none [holm]
#   --fit      linear | gam [linear]
#
# What is computed, for each run (model, run) and each pair (a, b) of OOD test sets, on the checkpoints where
# a, b and the ID score are all present (n of them), with k = 1 control (the ID score):
#   r_raw      cor(a, b, method)
#   r_partial  the partial correlation of a and b given ID, with ppcor's semantics:
#                pearson   correlation of the residuals of a and b regressed on [1, ID] (QR, lm.fit)
#                spearman  the same on average ranks of a, b and ID
#                kendall   -cov2cor(solve(T))[a, b], T the 3 x 3 Kendall tau-b matrix (ggm::pcor)
#              With ppcor installed, ppcor::pcor.test gives estimate and test instead (backend "ppcor");
#              otherwise the backend is "ggm+lm".
#   statistic, df, p_value
#              pearson, spearman: t = r sqrt(df / (1 - r^2)), df = n - 2 - k, p = 2 P(T_df > |t|)
#                (ggm::pcor.test, the same formula as ppcor::pcor.test)
#              kendall: ppcor's normal approximation, p = 2 P(Z > |z|) with
#                z = r / sqrt(2 (2 (n - k) + 5) / (9 (n - k) (n - 1 - k))); df is reported as n - 2 - k
#   p_adjusted p.adjust(p_value, adjust) over all pairs of the run (NA p-values are kept and not counted)
#
# --fit gam (backend "mgcv"): each OOD series is residualised on a penalised cubic regression spline of the ID
#   score, mgcv::gam(y ~ s(id, k = 10, bs = "cr"), method = "GCV.Cp"), with k lowered (and a warning) to the
#   number of distinct ID values when there are fewer than 10; the residuals of a and b are then correlated
#   with `method` (Pearson, Spearman or Kendall tau-b of the residuals). The control costs edf_x degrees of
#   freedom instead of k = 1, where edf_x is the EDF of the smooth term s(id) fitted to series x (the fit's
#   total EDF minus the intercept; a straight line has edf 1). A pair uses the larger of its two EDFs, the
#   conservative choice:
#       k_eff = max(edf_a, edf_b),   df = n - 2 - k_eff   (= n - 1 - the larger total EDF; not an integer)
#   and the t-test above with that df (Kendall: the normal approximation with k = k_eff). The k column still
#   reports the number of controls (1); edf_a and edf_b are reported on every row (1 under --fit linear).
#
# Base R plus ggm (mgcv for --fit gam; ppcor when installed). A constant series, or too few checkpoints for
# the degrees of freedom, gives NA for that pair rather than an error.

suppressPackageStartupMessages({
  library(stats)
  library(utils)
})

METHODS <- c("pearson", "spearman", "kendall")
FITS <- c("linear", "gam")
GAM_K <- 10L

usage <- function() {
  paste(
    "usage: Rscript R/gengen_analyse.R scores.csv out.csv [--id TESTSET] [--ood A,B,...] [--metric acc]",
    "[--method pearson|spearman|kendall] [--adjust holm] [--fit linear|gam]"
  )
}

fail <- function(...) {
  # One line on stderr and exit status 2, as gengen's CLI does for a user error.
  cat("gengen_analyse.R: error: ", ..., "\n", sep = "", file = stderr())
  quit(save = "no", status = 2)
}

parse_args <- function(args) {
  opts <- list(id = "lambada_openai", ood = NULL, metric = "acc", method = "pearson",
               adjust = "holm", fit = "linear")
  positional <- character(0)
  i <- 1L
  while (i <= length(args)) {
    a <- args[[i]]
    if (a %in% c("-h", "--help")) {
      cat(usage(), "\n")
      quit(save = "no", status = 0)
    }
    if (startsWith(a, "--")) {
      key_value <- strsplit(sub("^--", "", a), "=", fixed = TRUE)[[1]]
      key <- key_value[[1]]
      if (!key %in% names(opts)) fail("unknown option --", key, "; ", usage())
      if (length(key_value) > 1L) {
        value <- paste(key_value[-1L], collapse = "=")
      } else {
        if (i == length(args)) fail("option --", key, " needs a value")
        i <- i + 1L
        value <- args[[i]]
      }
      opts[[key]] <- value
    } else {
      positional <- c(positional, a)
    }
    i <- i + 1L
  }
  if (length(positional) != 2L) fail("expected two arguments, scores.csv and out.csv; ", usage())
  opts$input <- positional[[1]]
  opts$output <- positional[[2]]
  if (!is.null(opts$ood)) opts$ood <- trimws(strsplit(opts$ood, ",", fixed = TRUE)[[1]])
  if (!opts$method %in% METHODS) {
    fail("--method ", opts$method, " is not one of ", paste(METHODS, collapse = ", "))
  }
  if (!opts$fit %in% FITS) fail("--fit ", opts$fit, " is not one of ", paste(FITS, collapse = ", "))
  if (!opts$adjust %in% p.adjust.methods) {
    fail("--adjust ", opts$adjust, " is not one of ", paste(p.adjust.methods, collapse = ", "))
  }
  opts
}

read_scores <- function(path, metric) {
  if (!file.exists(path)) fail(path, ": no such file")
  scores <- tryCatch(
    read.csv(path, stringsAsFactors = FALSE, check.names = FALSE,
             colClasses = c(model = "character", run = "character", testset = "character",
                            metric = "character")),
    error = function(e) fail(path, ": cannot read as CSV (", conditionMessage(e), ")")
  )
  needed <- c("model", "run", "step", "testset", "metric", "value")
  missing_columns <- setdiff(needed, names(scores))
  if (length(missing_columns) > 0L) {
    fail(path, ": missing column(s) ", paste(missing_columns, collapse = ", "))
  }
  scores$value <- suppressWarnings(as.numeric(scores$value))
  scores <- scores[scores$metric == metric, needed, drop = FALSE]
  if (nrow(scores) == 0L) fail(path, ": no rows with metric ", metric)
  key <- paste(scores$model, scores$run, scores$step, scores$testset, sep = "\r")
  if (anyDuplicated(key)) {
    d <- scores[duplicated(key), ][1, ]
    fail(path, ": more than one ", metric, " score for model ", d$model, ", run ", d$run, ", step ",
         d$step, ", testset ", d$testset)
  }
  scores
}

wide_run <- function(run_scores) {
  # Steps x test sets matrix of one run's scores (NA where a score is missing), rows in step order.
  steps <- sort(unique(run_scores$step))
  testsets <- sort(unique(run_scores$testset), method = "radix")
  wide <- matrix(NA_real_, nrow = length(steps), ncol = length(testsets),
                 dimnames = list(as.character(steps), testsets))
  wide[cbind(match(run_scores$step, steps), match(run_scores$testset, testsets))] <- run_scores$value
  wide
}

ppcor_available <- function() requireNamespace("ppcor", quietly = TRUE)

rank_average <- function(x) rank(x, ties.method = "average")

is_constant <- function(x) length(x) < 2L || all(x == x[[1]])

linear_residuals <- function(y, control) unname(residuals(lm.fit(cbind(1, control), y)))

gam_residualise <- function(y, control) {
  # Residuals and smooth-term EDF of y ~ s(control, k = 10, bs = "cr") fitted by GCV.Cp.
  distinct <- length(unique(control))
  k <- min(GAM_K, distinct)
  if (k < GAM_K) {
    note <- sprintf("only %d distinct ID values: basis dimension k lowered from %d to %d",
                    distinct, GAM_K, k)
    warning(note, call. = FALSE)
  }
  if (k < 3L) return(list(residuals = rep(NA_real_, length(y)), edf = NA_real_))
  fit <- mgcv::gam(y ~ s(control, k = k, bs = "cr"), method = "GCV.Cp",
                   data = data.frame(y = y, control = control))
  list(residuals = unname(residuals(fit)), edf = sum(fit$edf) - 1)
}

kendall_partial <- function(a, b, control) {
  tau <- cor(cbind(a, b, control), method = "kendall")
  ggm::pcor(c(1L, 2L, 3L), tau)
}

t_test <- function(r, df) {
  # ggm::pcor.test's t-test (identical to ppcor's) for a partial correlation with df degrees of freedom.
  statistic <- r * sqrt(df) / sqrt(1 - r * r)
  c(statistic = statistic, p_value = 2 * pt(-abs(statistic), df))
}

kendall_test <- function(r, n, k) {
  # ppcor's normal approximation for a partial Kendall tau given k controls.
  statistic <- r / sqrt(2 * (2 * (n - k) + 5) / (9 * (n - k) * (n - 1 - k)))
  c(statistic = statistic, p_value = 2 * pnorm(-abs(statistic)))
}

residual_cache <- function(fit, method) {
  # Memoised residualisation of one series on the control over a given set of checkpoints.
  cache <- new.env(hash = TRUE)
  function(name, y, control, rows) {
    key <- paste(name, paste(which(rows), collapse = ","), sep = "|")
    if (!is.null(cache[[key]])) return(cache[[key]])
    y <- y[rows]
    control <- control[rows]
    result <- if (fit == "gam") {
      gam_residualise(y, control)
    } else if (method == "spearman") {
      list(residuals = linear_residuals(rank_average(y), rank_average(control)), edf = 1)
    } else {
      list(residuals = linear_residuals(y, control), edf = 1)
    }
    assign(key, result, envir = cache)
    result
  }
}

empty_pair <- function(n, k) {
  list(n = n, k = k, r_raw = NA_real_, r_partial = NA_real_, statistic = NA_real_, df = NA_real_,
       p_value = NA_real_, edf_a = NA_real_, edf_b = NA_real_)
}

analyse_pair <- function(a, b, control, name_a, name_b, opts, residualise, use_ppcor) {
  k <- 1L
  rows <- !is.na(a) & !is.na(b) & !is.na(control)
  n <- sum(rows)
  if (n - 2L - k < 1L || is_constant(a[rows]) || is_constant(b[rows]) || is_constant(control[rows])) {
    return(empty_pair(n, k))
  }
  r_raw <- cor(a[rows], b[rows], method = opts$method)
  if (opts$fit == "linear" && use_ppcor) {
    test <- ppcor::pcor.test(a[rows], b[rows], control[rows], method = opts$method)
    return(list(n = n, k = k, r_raw = r_raw, r_partial = test$estimate, statistic = test$statistic,
                df = n - 2 - k, p_value = test$p.value, edf_a = 1, edf_b = 1))
  }
  if (opts$fit == "linear" && opts$method == "kendall") {
    r <- kendall_partial(a[rows], b[rows], control[rows])
    test <- kendall_test(r, n, k)
    return(list(n = n, k = k, r_raw = r_raw, r_partial = r, statistic = test[["statistic"]],
                df = n - 2 - k, p_value = test[["p_value"]], edf_a = 1, edf_b = 1))
  }
  res_a <- residualise(name_a, a, control, rows)
  res_b <- residualise(name_b, b, control, rows)
  k_eff <- max(res_a$edf, res_b$edf)
  df <- n - 2 - k_eff
  if (is.na(df) || df <= 0) return(empty_pair(n, k))
  # Under --fit linear with Pearson or Spearman the residuals are already on (ranked) data: correlate them
  # with Pearson. Under --fit gam the residuals are correlated with the chosen method.
  residual_method <- if (opts$fit == "gam") opts$method else "pearson"
  r <- cor(res_a$residuals, res_b$residuals, method = residual_method)
  test <- if (opts$method == "kendall") {
    kendall_test(r, n, k_eff)
  } else if (opts$fit == "linear") {
    unlist(ggm::pcor.test(r, k, n)[c("tval", "pvalue")], use.names = FALSE)
  } else {
    t_test(r, df)
  }
  list(n = n, k = k, r_raw = r_raw, r_partial = r, statistic = test[[1]], df = df, p_value = test[[2]],
       edf_a = res_a$edf, edf_b = res_b$edf)
}

analyse_run <- function(run_scores, opts, use_ppcor) {
  wide <- wide_run(run_scores)
  model <- run_scores$model[[1]]
  run <- run_scores$run[[1]]
  if (!opts$id %in% colnames(wide)) {
    fail("--id ", opts$id, ": no ", opts$metric, " scores in model ", model, ", run ", run)
  }
  ood <- if (is.null(opts$ood)) setdiff(colnames(wide), opts$id) else opts$ood
  unknown <- setdiff(ood, colnames(wide))
  if (length(unknown) > 0L) {
    fail("--ood ", paste(unknown, collapse = ","), ": no ", opts$metric, " scores in model ", model,
         ", run ", run)
  }
  if (opts$id %in% ood) fail("--ood lists the ID test set ", opts$id)
  ood <- sort(unique(ood), method = "radix")
  if (length(ood) < 2L) fail("model ", model, ", run ", run, ": fewer than two OOD test sets")
  control <- wide[, opts$id]
  residualise <- residual_cache(opts$fit, opts$method)
  pairs <- utils::combn(length(ood), 2L)
  names_a <- ood[pairs[1L, ]]
  names_b <- ood[pairs[2L, ]]
  results <- Map(function(name_a, name_b) {
    analyse_pair(wide[, name_a], wide[, name_b], control, name_a, name_b, opts, residualise, use_ppcor)
  }, names_a, names_b)
  column <- function(field) vapply(results, function(result) as.numeric(result[[field]]), numeric(1))
  table <- data.frame(model = model, run = run, testset_a = names_a, testset_b = names_b,
                      n = as.integer(column("n")), k = as.integer(column("k")), r_raw = column("r_raw"),
                      r_partial = column("r_partial"), statistic = column("statistic"), df = column("df"),
                      p_value = column("p_value"), edf_a = column("edf_a"), edf_b = column("edf_b"),
                      stringsAsFactors = FALSE, row.names = NULL)
  table$p_adjusted <- p.adjust(table$p_value, method = opts$adjust)
  table
}

format_numbers <- function(table) {
  # 17 significant digits so that a reviewer's diff sees every bit R computed.
  for (column in names(table)) {
    if (is.double(table[[column]])) {
      values <- table[[column]]
      table[[column]] <- ifelse(is.na(values), NA_character_, sprintf("%.17g", values))
    }
  }
  table
}

main <- function() {
  opts <- parse_args(commandArgs(trailingOnly = TRUE))
  use_ppcor <- ppcor_available()
  if (opts$fit == "gam" && !requireNamespace("mgcv", quietly = TRUE)) {
    fail("--fit gam needs the R package mgcv")
  }
  if (!use_ppcor && !requireNamespace("ggm", quietly = TRUE)) fail("needs the R package ppcor or ggm")
  scores <- read_scores(opts$input, opts$metric)
  groups <- split(scores, list(scores$model, scores$run), drop = TRUE, sep = "\r")
  groups <- groups[order(names(groups), method = "radix")]
  table <- do.call(rbind, lapply(groups, analyse_run, opts = opts, use_ppcor = use_ppcor))
  backend <- if (opts$fit == "gam") "mgcv" else if (use_ppcor) "ppcor" else "ggm+lm"
  table$metric <- opts$metric
  table$fit <- opts$fit
  table$method <- opts$method
  table$inference <- "t-test"
  table$backend <- backend
  columns <- c("model", "run", "testset_a", "testset_b", "metric", "n", "k", "r_raw", "r_partial",
               "statistic", "df", "p_value", "p_adjusted", "fit", "method", "inference", "backend",
               "edf_a", "edf_b")
  table <- table[, columns]
  rownames(table) <- NULL
  text_columns <- which(vapply(table, is.character, logical(1)))
  write.csv(format_numbers(table), opts$output, row.names = FALSE, na = "NA", quote = text_columns)
  invisible(table)
}

if (sys.nframe() == 0L) main()
