#!/usr/bin/env Rscript
# gengen_analyse.R -- gengen's partial-correlation analysis, computed in R: every deterministic column of
# `gengen analyse`'s pairs table.
#
# Usage:
#   Rscript R/gengen_analyse.R scores.csv out.csv [--id TESTSET] [--ood A,B,...] [--metric acc]
#           [--method pearson|spearman|kendall] [--adjust holm] [--fit linear|gam] [--ci-level 0.95]
#           [--mode auto|checkpoints|across_runs] [--by model,size,shots]
#
#   scores.csv  gengen's long score table (e.g. `gengen export`); needs at least the columns
#               model, run, step, testset, metric, value (and the --by columns). Other columns are ignored.
#   out.csv     one row per group x unordered pair of OOD test sets, with gengen's pairs-table columns:
#               level, model, run, testset_a, testset_b, metric, n, k, r_raw, r_partial, statistic, df,
#               p_value, p_adjusted, ci_low, ci_high, ci_level, ar_order_a, ar_order_b, fit, method,
#               inference, backend, edf_a, edf_b (plus size/shots/study/family when --by uses them)
#
# Options (defaults in brackets):
#   --id       the in-domain test set whose score is controlled for [lambada_openai]
#   --ood      comma-separated OOD test sets [every test set of the metric except --id]
#   --metric   the metric to analyse [acc]
#   --method   pearson | spearman | kendall [pearson]
#   --adjust   a p.adjust method: holm, hochberg, hommel, bonferroni, BH, BY, fdr, none [holm]
#   --fit      linear | gam [linear]
#   --ci-level level of the t-test's interval [0.95]
#   --mode     checkpoints: one group per run (model, run), its checkpoints the observations;
#              across_runs: one group per cell (the --by columns), its runs the observations, each run's
#              final (last-step) score; auto: across runs when every (model, run) has a single step [auto]
#   --by       cell columns in across-run mode, any of study, model, family, size, shots
#              [model,size,shots: those the table has]
#
# Groups, as gengen forms them: in checkpoints mode the rows of a group are the run's checkpoints in step
# order (level "run"); across runs they are the cell's runs ordered by "model/run" (level "across_runs",
# run "across R runs", model "*" when the cell spans several models). Rows lacking the ID score or any OOD
# score are dropped, and OOD test sets constant over the remaining rows are left out (with a warning), so n is
# the same for every pair of a group.
#
# What is computed, for each group and each pair (a, b) of OOD test sets, with k = 1 control (the ID score):
#   r_raw      cor(a, b, method)
#   r_partial  the partial correlation of a and b given ID, with ppcor's semantics:
#                pearson   correlation of the residuals of a and b regressed on [1, ID] (QR, lm.fit)
#                spearman  the same on average ranks of a, b and ID
#                kendall   -cov2cor(solve(T))[a, b], T the 3 x 3 Kendall tau-b matrix (ggm::pcor)
#              With ppcor installed, ppcor::pcor.test gives estimate and test instead (backend "ppcor"),
#              except where ppcor would replace the inverse of the covariance matrix by a generalised inverse
#              (it does so when the determinant is below machine epsilon, a scale-dependent rule, and then
#              drops directions the data do have): those rows use lm/ggm (backend "ggm+lm").
#   statistic, df, p_value
#              pearson, spearman: t = r sqrt(df / (1 - r^2)), df = n - 2 - k, p = 2 P(T_df > |t|)
#                (ggm::pcor.test, the same formula as ppcor::pcor.test)
#              kendall: ppcor's normal approximation, p = 2 P(Z > |z|) with
#                z = r / sqrt(2 (2 (n - k) + 5) / (9 (n - k) (n - 1 - k))); df is reported as n - 2 - k
#   p_adjusted p.adjust(p_value, adjust) over all pairs of the group (NA p-values are kept and not counted);
#              gengen adjusts this p-value under `--inference t-test` (its default adjusts p_sieve)
#   ci_low, ci_high
#              the t-test's interval, consistent with its p-value (gengen's `--inference t-test` interval):
#                z = atanh(r), se = z / t (1 / sqrt(df) when r = 0), tanh(z -/+ qt((1 + level) / 2, df) |se|);
#              it contains r_partial and excludes 0 exactly when p_value < 1 - level. Kendall: NA (no
#              interval is consistent with its normal approximation).
#   ar_order_a, ar_order_b
#              the AR order that gengen's default inference (the AR-sieve bootstrap) chooses by AIC for each
#              test set's residual series e (the residuals of the control above; ranks for spearman; the
#              mgcv residuals under --fit gam) with max_order = min(4, max(1, floor(n / 10))): for
#              p = 0..max_order, on rows t = max_order + 1..n, the least-squares fit of
#                e_t ~ 1 + ID_t + ID_{t-1} + ... + ID_{t-p} + e_{t-1} + ... + e_{t-p}
#              (ID ranked for spearman), AIC(p) = T log(RSS_p / T) + 2 p (1 + q), T = n - max_order, q = 1;
#              the smallest AIC wins (an order must beat the previous best by 1e-12). NA for Kendall and
#              across runs (gengen runs no sieve there) and when n < max_order + 6.
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
# Not reproduced (resampling-based, see R/README.md): gengen's default p_sieve, se_z, df_sieve and its
# ci_low/ci_high, p_perm and the bootstrap intervals.
#
# Base R plus ggm (mgcv for --fit gam; ppcor when installed). A constant series, or too few observations for
# the degrees of freedom, gives NA for that pair rather than an error.

suppressPackageStartupMessages({
  library(stats)
  library(utils)
})

METHODS <- c("pearson", "spearman", "kendall")
FITS <- c("linear", "gam")
MODES <- c("auto", "checkpoints", "across_runs")
BY_COLUMNS <- c("study", "model", "family", "size", "shots")
DEFAULT_BY <- c("model", "size", "shots")
GAM_K <- 10L
# ppcor's warning when it replaces solve() by MASS::ginv (determinant of the covariance matrix below eps).
PPCOR_GINV_WARNING <- "Moore-Penrose"

usage <- function() {
  paste(
    "usage: Rscript R/gengen_analyse.R scores.csv out.csv [--id TESTSET] [--ood A,B,...] [--metric acc]",
    "[--method pearson|spearman|kendall] [--adjust holm] [--fit linear|gam] [--ci-level 0.95]",
    "[--mode auto|checkpoints|across_runs] [--by model,size,shots]"
  )
}

fail <- function(...) {
  # One line on stderr and exit status 2, as gengen's CLI does for a user error.
  cat("gengen_analyse.R: error: ", ..., "\n", sep = "", file = stderr())
  quit(save = "no", status = 2)
}

split_list <- function(value) {
  items <- trimws(strsplit(value, ",", fixed = TRUE)[[1]])
  items[nzchar(items)]
}

parse_args <- function(args) {
  opts <- list(id = "lambada_openai", ood = NULL, metric = "acc", method = "pearson",
               adjust = "holm", fit = "linear", "ci-level" = "0.95", mode = "auto", by = NULL)
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
  if (!is.null(opts$ood)) opts$ood <- split_list(opts$ood)
  if (!opts$method %in% METHODS) {
    fail("--method ", opts$method, " is not one of ", paste(METHODS, collapse = ", "))
  }
  if (!opts$fit %in% FITS) fail("--fit ", opts$fit, " is not one of ", paste(FITS, collapse = ", "))
  if (!opts$adjust %in% p.adjust.methods) {
    fail("--adjust ", opts$adjust, " is not one of ", paste(p.adjust.methods, collapse = ", "))
  }
  if (!opts$mode %in% MODES) fail("--mode ", opts$mode, " is not one of ", paste(MODES, collapse = ", "))
  level <- suppressWarnings(as.numeric(opts[["ci-level"]]))
  if (is.na(level) || level <= 0 || level >= 1) {
    fail("--ci-level ", opts[["ci-level"]], " must be a number strictly between 0 and 1")
  }
  opts$ci_level <- level
  if (!is.null(opts$by)) {
    opts$by <- split_list(opts$by)
    unknown <- setdiff(opts$by, BY_COLUMNS)
    if (length(unknown) > 0L) {
      fail("--by ", unknown[[1]], " is not one of ", paste(BY_COLUMNS, collapse = ", "))
    }
  }
  opts
}

read_scores <- function(path, metric, by) {
  if (!file.exists(path)) fail(path, ": no such file")
  scores <- tryCatch(
    read.csv(path, stringsAsFactors = FALSE, check.names = FALSE,
             colClasses = c(model = "character", run = "character", testset = "character",
                            metric = "character")),
    error = function(e) fail(path, ": cannot read as CSV (", conditionMessage(e), ")")
  )
  needed <- c("model", "run", "step", "testset", "metric", "value")
  missing_columns <- setdiff(c(needed, by), names(scores))
  if (length(missing_columns) > 0L) {
    fail(path, ": missing column(s) ", paste(missing_columns, collapse = ", "))
  }
  scores$value <- suppressWarnings(as.numeric(scores$value))
  keep <- unique(c(needed, intersect(BY_COLUMNS, names(scores))))
  scores <- scores[scores$metric == metric, keep, drop = FALSE]
  if (nrow(scores) == 0L) fail(path, ": no rows with metric ", metric)
  key <- paste(scores$model, scores$run, scores$step, scores$testset, sep = "\r")
  if (anyDuplicated(key)) {
    d <- scores[duplicated(key), ][1, ]
    fail(path, ": more than one ", metric, " score for model ", d$model, ", run ", d$run, ", step ",
         d$step, ", testset ", d$testset)
  }
  scores
}

wide_table <- function(scores, row_key) {
  # Rows x test sets matrix of scores (NA where a score is missing), rows sorted by row_key.
  rows <- sort(unique(row_key), method = "radix")
  testsets <- sort(unique(scores$testset), method = "radix")
  wide <- matrix(NA_real_, nrow = length(rows), ncol = length(testsets),
                 dimnames = list(as.character(rows), testsets))
  wide[cbind(match(row_key, rows), match(scores$testset, testsets))] <- scores$value
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

consistent_interval <- function(r, statistic, df, level) {
  # The Fisher-z interval whose standard error is the one the t statistic implies (gengen's
  # consistent_interval): it excludes 0 exactly when the two-sided p-value is below 1 - level.
  z <- atanh(pmin(pmax(r, -1 + 1e-15), 1 - 1e-15))
  se <- ifelse(abs(r) > 1e-12, z / statistic, 1 / sqrt(df))
  quantile <- ifelse(!is.na(df) & df > 0, suppressWarnings(qt((1 + level) / 2, df)), NA_real_)
  half <- quantile * abs(se)
  list(low = tanh(z - half), high = tanh(z + half))
}

default_max_order <- function(n) as.integer(min(4, max(1, n %/% 10)))

ar_order_aic <- function(e, control, max_order) {
  # gengen.stats.sieve.fit_autoregression's order: AIC over p = 0..max_order of the dynamic regression
  # e_t ~ [1, Z_t, .., Z_{t-p}] + [e_{t-1}, .., e_{t-p}], every order fitted on the rows t = max_order + 1..n.
  n <- length(e)
  if (anyNA(e) || n < max_order + 6L) return(NA_integer_)  # gengen's sieve needs n >= k + 5 + max_order
  rows <- (max_order + 1L):n
  count <- length(rows)
  q <- NCOL(control)
  best <- Inf
  order <- 0L
  for (p in 0:max_order) {
    design <- cbind(1, vapply(0:p, function(i) control[rows - i], numeric(count)))
    if (p > 0L) design <- cbind(design, vapply(seq_len(p), function(i) e[rows - i], numeric(count)))
    fit <- lm.fit(design, e[rows])
    rss <- sum(fit$residuals^2)
    aic <- count * log(max(rss, 1e-300) / count) + 2 * p * (1 + q)
    if (aic < best - 1e-12) {
      best <- aic
      order <- p
    }
  }
  order
}

residual_cache <- function(fit, method, control) {
  # Memoised residualisation of one series on the group's control.
  cache <- new.env(hash = TRUE)
  function(name, y) {
    if (!is.null(cache[[name]])) return(cache[[name]])
    result <- if (fit == "gam") {
      gam_residualise(y, control)
    } else if (method == "spearman") {
      list(residuals = linear_residuals(rank_average(y), rank_average(control)), edf = 1)
    } else {
      list(residuals = linear_residuals(y, control), edf = 1)
    }
    assign(name, result, envir = cache)
    result
  }
}

empty_pair <- function(n, k) {
  list(n = n, k = k, r_raw = NA_real_, r_partial = NA_real_, statistic = NA_real_, df = NA_real_,
       p_value = NA_real_, edf_a = NA_real_, edf_b = NA_real_, backend = NA_character_)
}

ppcor_test <- function(a, b, control, method) {
  # ppcor::pcor.test, or NULL where ppcor falls back to a generalised inverse (see the header).
  fell_back <- FALSE
  test <- withCallingHandlers(
    ppcor::pcor.test(a, b, control, method = method),
    warning = function(w) {
      if (grepl(PPCOR_GINV_WARNING, conditionMessage(w), fixed = TRUE)) {
        fell_back <<- TRUE
        invokeRestart("muffleWarning")
      }
    }
  )
  if (fell_back) NULL else test
}

analyse_pair <- function(a, b, control, name_a, name_b, opts, residualise, use_ppcor) {
  k <- 1L
  n <- length(a)
  if (n - 2L - k < 1L || is_constant(a) || is_constant(b) || is_constant(control)) {
    return(empty_pair(n, k))
  }
  r_raw <- cor(a, b, method = opts$method)
  if (opts$fit == "linear" && use_ppcor) {
    test <- ppcor_test(a, b, control, opts$method)
    if (!is.null(test)) {
      return(list(n = n, k = k, r_raw = r_raw, r_partial = test$estimate, statistic = test$statistic,
                  df = n - 2 - k, p_value = test$p.value, edf_a = 1, edf_b = 1, backend = "ppcor"))
    }
  }
  linear_backend <- "ggm+lm"
  if (opts$fit == "linear" && opts$method == "kendall") {
    r <- kendall_partial(a, b, control)
    test <- kendall_test(r, n, k)
    return(list(n = n, k = k, r_raw = r_raw, r_partial = r, statistic = test[["statistic"]],
                df = n - 2 - k, p_value = test[["p_value"]], edf_a = 1, edf_b = 1, backend = linear_backend))
  }
  res_a <- residualise(name_a, a)
  res_b <- residualise(name_b, b)
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
       edf_a = res_a$edf, edf_b = res_b$edf, backend = if (opts$fit == "gam") "mgcv" else linear_backend)
}

analyse_group <- function(wide, meta, opts, use_ppcor, level) {
  # The pairs table of one group: rows of `wide` are its observations (checkpoints in step order, or runs).
  label <- if (level == "run") {
    paste0("model ", meta$model, ", run ", meta$run)
  } else {
    paste0("cell ", paste(names(meta), unlist(meta), sep = " ", collapse = ", "))
  }
  if (!opts$id %in% colnames(wide)) fail("--id ", opts$id, ": no ", opts$metric, " scores in ", label)
  ood <- if (is.null(opts$ood)) setdiff(colnames(wide), opts$id) else opts$ood
  unknown <- setdiff(ood, colnames(wide))
  if (length(unknown) > 0L) fail("--ood ", paste(unknown, collapse = ","), ": no ", opts$metric, " scores in ", label)
  if (opts$id %in% ood) fail("--ood lists the ID test set ", opts$id)
  ood <- sort(unique(ood), method = "radix")
  # As gengen: rows lacking the ID or any OOD score are dropped; OOD test sets constant on the rest left out.
  complete <- stats::complete.cases(wide[, c(opts$id, ood), drop = FALSE])
  wide <- wide[complete, , drop = FALSE]
  constant <- ood[vapply(ood, function(name) is_constant(wide[, name]), logical(1))]
  if (length(constant) > 0L) {
    warning(label, ": ", length(constant), " OOD test set(s) constant (", paste(constant, collapse = ", "),
            "); left out", call. = FALSE)
    ood <- setdiff(ood, constant)
  }
  if (length(ood) < 2L) fail(label, ": fewer than two OOD test sets")
  control <- wide[, opts$id]
  n <- nrow(wide)
  residualise <- residual_cache(opts$fit, opts$method, control)
  pairs <- utils::combn(length(ood), 2L)
  names_a <- ood[pairs[1L, ]]
  names_b <- ood[pairs[2L, ]]
  results <- Map(function(name_a, name_b) {
    analyse_pair(wide[, name_a], wide[, name_b], control, name_a, name_b, opts, residualise, use_ppcor)
  }, names_a, names_b)
  column <- function(field) vapply(results, function(result) as.numeric(result[[field]]), numeric(1))
  table <- data.frame(testset_a = names_a, testset_b = names_b,
                      n = as.integer(column("n")), k = as.integer(column("k")), r_raw = column("r_raw"),
                      r_partial = column("r_partial"), statistic = column("statistic"), df = column("df"),
                      p_value = column("p_value"), edf_a = column("edf_a"), edf_b = column("edf_b"),
                      backend = vapply(results, function(result) result$backend, character(1)),
                      stringsAsFactors = FALSE, row.names = NULL)
  table$p_adjusted <- p.adjust(table$p_value, method = opts$adjust)
  if (opts$method == "kendall") {
    table$ci_low <- NA_real_
    table$ci_high <- NA_real_
  } else {
    interval <- consistent_interval(table$r_partial, table$statistic, table$df, opts$ci_level)
    table$ci_low <- interval$low
    table$ci_high <- interval$high
  }
  table$ar_order_a <- NA_integer_
  table$ar_order_b <- NA_integer_
  # gengen's AR-sieve runs on checkpoint trajectories of Pearson or Spearman analyses only.
  if (level == "run" && opts$method != "kendall") {
    max_order <- default_max_order(n)
    exogenous <- if (opts$method == "spearman" && opts$fit == "linear") rank_average(control) else control
    orders <- vapply(ood, function(name) {
      ar_order_aic(residualise(name, wide[, name])$residuals, exogenous, max_order)
    }, integer(1))
    table$ar_order_a <- unname(orders[table$testset_a])
    table$ar_order_b <- unname(orders[table$testset_b])
  }
  for (name in rev(names(meta))) table <- cbind(stats::setNames(data.frame(meta[[name]]), name), table)
  table$level <- level
  table
}

final_scores <- function(scores) {
  # Each run's rows at its last step (the largest step number), as gengen's across-run mode uses them.
  run_key <- paste(scores$model, scores$run, sep = "\r")
  last <- ave(scores$step, run_key, FUN = max)
  scores[scores$step == last, , drop = FALSE]
}

single_score_per_run <- function(scores) {
  steps <- tapply(scores$step, paste(scores$model, scores$run, sep = "\r"), function(s) length(unique(s)))
  all(steps == 1L)
}

run_groups <- function(scores, opts, use_ppcor) {
  groups <- split(scores, list(scores$model, scores$run), drop = TRUE, sep = "\r")
  groups <- groups[order(names(groups), method = "radix")]
  lapply(groups, function(rows) {
    meta <- list(model = rows$model[[1]], run = rows$run[[1]])
    analyse_group(wide_table(rows, rows$step), meta, opts, use_ppcor, "run")
  })
}

across_run_groups <- function(scores, opts, use_ppcor) {
  final <- final_scores(scores)
  final$run_key <- paste(final$model, final$run, sep = "/")
  by <- if (is.null(opts$by)) intersect(DEFAULT_BY, names(scores)) else opts$by
  cell_key <- if (length(by) > 0L) do.call(paste, c(unname(as.list(final[by])), sep = "\r")) else ""
  cells <- split(final, cell_key, drop = TRUE)
  # gengen sorts cells by their column values (pandas groupby, sort = TRUE).
  first_rows <- do.call(rbind, lapply(cells, function(cell) cell[1L, by, drop = FALSE]))
  ordering <- if (length(by) > 0L) do.call(order, c(unname(as.list(first_rows)), method = "radix")) else 1L
  lapply(cells[ordering], function(cell) {
    meta <- lapply(stats::setNames(by, by), function(column) cell[[column]][[1]])
    if (is.null(meta$model)) {
      meta$model <- if (length(unique(cell$model)) > 1L) "*" else cell$model[[1]]
    }
    meta$run <- sprintf("across %d runs", length(unique(cell$run_key)))
    analyse_group(wide_table(cell, cell$run_key), meta, opts, use_ppcor, "across_runs")
  })
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
  if (!requireNamespace("ggm", quietly = TRUE)) fail("needs the R package ggm")
  scores <- read_scores(opts$input, opts$metric, opts$by)
  mode <- opts$mode
  if (mode == "auto") mode <- if (single_score_per_run(scores)) "across_runs" else "checkpoints"
  tables <- if (mode == "across_runs") {
    across_run_groups(scores, opts, use_ppcor)
  } else {
    run_groups(scores, opts, use_ppcor)
  }
  table <- do.call(rbind, unname(tables))
  table$metric <- opts$metric
  table$fit <- opts$fit
  table$method <- opts$method
  table$inference <- "t-test"
  table$ci_level <- opts$ci_level
  cell_columns <- intersect(setdiff(BY_COLUMNS, "model"), names(table))
  columns <- c("level", "model", cell_columns, "run", "testset_a", "testset_b", "metric", "n", "k", "r_raw",
               "r_partial", "statistic", "df", "p_value", "p_adjusted", "ci_low", "ci_high", "ci_level",
               "ar_order_a", "ar_order_b", "fit", "method", "inference", "backend", "edf_a", "edf_b")
  table <- table[, columns]
  rownames(table) <- NULL
  text_columns <- which(vapply(table, is.character, logical(1)))
  write.csv(format_numbers(table), opts$output, row.names = FALSE, na = "NA", quote = text_columns)
  invisible(table)
}

if (sys.nframe() == 0L) main()
