#!/usr/bin/env Rscript
# gengen_analyse.R -- gengen's partial-correlation analysis, computed in R: every deterministic column of
# `gengen analyse`'s pairs table, including what a row's data can tell (repeated checkpoints, stuck test sets,
# untestable rows) and the leave-one-checkpoint-out verdict of `--inference t-test`.
#
# Usage:
#   Rscript R/gengen_analyse.R scores.csv out.csv [--id TESTSET] [--ood A,B,...] [--metric acc]
#           [--method pearson|spearman|kendall] [--adjust holm] [--fit linear|gam] [--ci-level 0.95]
#           [--alpha 0.05] [--mode auto|checkpoints|across_runs] [--by model,size,shots]
#           [--leave-one-out | --no-leave-one-out]
#
#   scores.csv  gengen's long score table (e.g. `gengen export`); needs at least the columns
#               model, run, step, testset, metric, value (and the --by columns); an n_examples column, when
#               present, gives each test set's measurement noise. Other columns are ignored.
#   out.csv     one row per group x unordered pair of OOD test sets, with gengen's pairs-table columns:
#               level, model, run, testset_a, testset_b, metric, n, n_steps, n_informative, k, r_raw,
#               r_partial, statistic, df, p_value, p_loo_max, influential_step, influence, p_adjusted,
#               p_adjusted_from,
#               significant, ci_low, ci_high, ci_level, testable, untestable_reason, ar_order_a, ar_order_b,
#               fit, method, inference, backend, edf_a, edf_b (plus size/shots/study/family when --by uses them)
#
# Options (defaults in brackets):
#   --id       the in-domain test set whose score is controlled for [lambada_openai]
#   --ood      comma-separated OOD test sets [every test set of the metric except --id]
#   --metric   the metric to analyse [acc]
#   --method   pearson | spearman | kendall [pearson]
#   --adjust   a p.adjust method: holm, hochberg, hommel, bonferroni, BH, BY, fdr, none [holm]
#   --fit      linear | gam [linear]
#   --ci-level level of the t-test's interval [0.95]
#   --alpha    significant = p_adjusted < alpha [0.05]
#   --mode     checkpoints: one group per run (model, run), its checkpoints the observations;
#              across_runs: one group per cell (the --by columns), its runs the observations, each run's
#              final (last-step) score; auto: across runs when every (model, run) has a single step [auto]
#   --by       cell columns in across-run mode, any of study, model, family, size, shots
#              [model,size,shots: those the table has]
#   --leave-one-out / --no-leave-one-out
#              whether a run's verdict is the largest p over deleting any one checkpoint (gengen's
#              leave_one_out=True, its default) or the t-test's p_value alone (gengen --no-leave-one-out)
#              [--leave-one-out]
#
# Groups, as gengen forms them: in checkpoints mode the rows of a group are the run's checkpoints in step
# order (level "run"); across runs they are the cell's runs ordered by "model/run" (level "across_runs",
# run "across R runs", model "*" when the cell spans several models). Rows lacking the ID score or any OOD
# score are dropped (n_steps counts the rest); in a run, a checkpoint whose scores equal those of the checkpoint
# before on every analysed test set (ID included, within 1e-12 relative) is the same checkpoint and is dropped
# (with a warning), and n counts the distinct checkpoints. OOD test sets constant over the remaining rows, or
# a linear function of ID (of its ranks for spearman/kendall: residual norm <= 1e-11 x centred norm), are
# left out (with a warning), so n is the same for every pair of a group.
#
# What a run's rows can tell (checkpoints mode; across runs every row is testable, n_informative = n). Two
# values are equal when they differ by at most tol = max(noise, 1e-12 max(1, max |x|)), where noise is the
# binomial sd sqrt(p (1 - p) / N) of an accuracy measured on N = median(n_examples) examples at p = the
# median score (0 without n_examples, or for values outside [0, 1]). For each OOD test set x over n
# checkpoints:
#   plateau     the longest run of consecutive checkpoints whose range is at most tol (the first if tied)
#               counts as one checkpoint: informative = n - length + 1; below 5 (df = n - 2 - k >= 2 with
#               k = 1) the test set is stuck: "x: 0.500 on checkpoints 2-11 (steps 100-1000), 10 of 11
#               [within measurement noise (+-0.0029)]; nothing left to correlate" (the reasons write an en
#               dash and a plus-minus sign where this comment has - and +-, as gengen's do)
#   two values  x takes fewer than 3 distinct values (to 1e-12 relative): informative = that count, and
#               "x: takes only 2 distinct values (0.500, 0.600) over n checkpoints"
#   ID function the ID score takes d < n distinct values and x is the same (within tol) wherever ID is:
#               informative = min(informative, d), untestable below 5 ("x: a function of the ID score, ...")
# Every pair with such a test set is an untestable row: testable FALSE, untestable_reason the test set's
# line, r_raw on the distinct checkpoints, everything else NA, significant FALSE. For the other pairs,
# n_informative = min(informative_a, informative_b, distinct (ID, a, b) rows) -- a checkpoint repeats a row
# when an earlier one has the same ID and the same a and b (1e-12 relative) -- and a pair with fewer than 5 is
# untestable too ("a and b: 3 informative of 11 checkpoints (3 distinct (ID, a, b) rows); too few to test";
# its r_partial, statistic, p_value, edf, AR orders NA).
#
# What is computed, for each group and each testable pair (a, b) of OOD test sets, with k = 1 control (ID):
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
#   p_loo_max, influential_step, influence (leave one checkpoint out: runs of n >= 6 checkpoints, pearson or
#              spearman, --leave-one-out, testable rows; NA otherwise)
#              r_(-t): the pair's partial correlation without checkpoint t, the control refitted on the other
#                n - 1 (lm.fit residuals; ranks recomputed for spearman; NA where a or b or ID is then constant
#                or a or b is a linear function of ID, residual norm <= 1e-11 x centred norm)
#              z = atanh r, se = |z / t| (1 / sqrt(df) when |r| <= 1e-12), s = sign(r) (+1 at 0);
#              influence of t: 1 - s atanh(r_(-t)) / |z|, the share of the estimate its deletion removes (above
#                1 when the sign flips; infinite, reported as 1, when nothing is left); influential_step = the
#                step with the largest influence (the first among ties), influence = that share; none when
#                |z| <= 1e-12
#              a deletion *carries* the estimate when its influence exceeds 0.5; it has one checkpoint fewer:
#                se_(-t) = se sqrt(f / (f - 1)), f = df - 1 = n - 3 - k, on 1 / se_(-t)^2 + 1 degrees of freedom
#              directional p: p(w, d) = min(1, 2 P(T_d > w)) for w > 0, 1 otherwise (an estimate on the other
#                side of 0 does not support the verdict)
#              p_loo_max = max(p(|z| / se, df), max over carrying t of p(s atanh r_(-t) / se_(-t), d_(-t)))
#                (a carrying deletion without an estimate: p = 1); = p_value when nothing carries the estimate
#   p_adjusted p.adjust(p_loo_max, adjust) where leave-one-out applies (p_adjusted_from "p_loo_max"), else
#              p.adjust(p_value, adjust) ("p_value"), over the group's testable pairs (NA not counted). This is
#              gengen's `--inference t-test`; its default decides by the sieve (p_sieve), which R does not
#              reproduce. significant = p_adjusted < alpha (FALSE where NA).
#   ci_low, ci_high
#              the t-test's interval, consistent with its p-value (gengen's `--inference t-test` interval):
#                tanh(z -/+ qt((1 + level) / 2, df) se); it contains r_partial and excludes 0 exactly when
#                p_value < 1 - level. With leave-one-out it becomes the hull of that interval and every
#                carrying deletion's tanh(atanh r_(-t) -/+ qt((1 + level) / 2, d_(-t)) se_(-t)) (spanning 0 when
#                one has no estimate): it excludes 0 exactly when p_loo_max < 1 - level. Kendall: NA (no
#                interval is consistent with its normal approximation).
#   ar_order_a, ar_order_b
#              the AR order that gengen's default inference (the AR-sieve bootstrap) chooses by AIC for each
#              test set's residual series e (the residuals of the control above; ranks for spearman; the
#              mgcv residuals under --fit gam) with max_order = min(4, max(1, floor(n / 10))): for
#              p = 0..max_order, on rows t = max_order + 1..n, the least-squares fit of
#                e_t ~ 1 + ID_t + ID_{t-1} + ... + ID_{t-p} + e_{t-1} + ... + e_{t-p}
#              (ID ranked for spearman), AIC(p) = T log(RSS_p / T) + 2 p (1 + q), T = n - max_order, q = 1;
#              the smallest AIC wins (an order must beat the previous best by 1e-12). NA for Kendall and
#              across runs (gengen runs no sieve there), for untestable rows and when n < max_order + 6.
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
#   Leave-one-out refits mgcv on each n - 1 checkpoints (mgcv's optimum, not gengen's global GCV search: the
#   GAM columns agree with gengen only approximately).
#
# Not reproduced (resampling-based, see R/README.md): gengen's default p_sieve, se_z, df_sieve, the sieve's
# p_loo_max and ci_low/ci_high, p_perm and the bootstrap intervals.
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
# Values closer than this, relative to the largest magnitude of the series (at least 1), are the same number.
EQUAL_RELATIVE <- 1e-12
# Fewest informative checkpoints a pair needs: df = n - 2 - k >= 2 with the one ID control.
MINIMUM_INFORMATIVE <- 5L
# A series whose residual norm on [1, ID] is at most this fraction of its centred norm is a linear function of ID.
MIN_RESIDUAL_FRACTION <- 1e-11
# A deletion that removes more than this share of atanh(r_partial) carries the estimate (gengen's CARRYING_SHARE).
CARRYING_SHARE <- 0.5
# Flags without a value, and the option each sets.
FLAGS <- c("leave-one-out" = TRUE, "no-leave-one-out" = FALSE)

usage <- function() {
  paste(
    "usage: Rscript R/gengen_analyse.R scores.csv out.csv [--id TESTSET] [--ood A,B,...] [--metric acc]",
    "[--method pearson|spearman|kendall] [--adjust holm] [--fit linear|gam] [--ci-level 0.95]",
    "[--alpha 0.05] [--mode auto|checkpoints|across_runs] [--by model,size,shots]",
    "[--leave-one-out | --no-leave-one-out]"
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
               adjust = "holm", fit = "linear", "ci-level" = "0.95", alpha = "0.05", mode = "auto",
               by = NULL)
  opts$leave_one_out <- TRUE
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
      if (key %in% names(FLAGS)) {
        if (length(key_value) > 1L) fail("option --", key, " takes no value")
        opts$leave_one_out <- FLAGS[[key]]
        i <- i + 1L
        next
      }
      if (!key %in% names(opts) || key == "leave_one_out") fail("unknown option --", key, "; ", usage())
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
  alpha <- suppressWarnings(as.numeric(opts$alpha))
  if (is.na(alpha) || alpha <= 0 || alpha >= 1) {
    fail("--alpha ", opts$alpha, " must be a number strictly between 0 and 1")
  }
  opts$alpha <- alpha
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
  if ("n_examples" %in% names(scores)) scores$n_examples <- suppressWarnings(as.numeric(scores$n_examples))
  keep <- unique(c(needed, intersect(c(BY_COLUMNS, "n_examples"), names(scores))))
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
  # Steps as whole numbers (as.character would write 1e+05).
  labels <- if (is.numeric(rows)) sprintf("%.0f", rows) else as.character(rows)
  wide <- matrix(NA_real_, nrow = length(rows), ncol = length(testsets), dimnames = list(labels, testsets))
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
  # A singular tau matrix (e.g. a short series ranked exactly as ID) has no partial tau: NA, not an error.
  tryCatch(ggm::pcor(c(1L, 2L, 3L), tau), error = function(e) NA_real_)
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

# --- What a run's checkpoints can tell ------------------------------------------------------------------------

equal_tolerance <- function(values) {
  # Absolute tolerance under which two of `values` are the same number (scores stored as decimals).
  EQUAL_RELATIVE * max(1, abs(values))
}

collapse_repeats <- function(wide) {
  # Drops each row equal (within equal_tolerance of the whole table) to the row before it in every column:
  # two evaluations with identical scores on every test set saw the same model, not two independent ones.
  if (nrow(wide) < 2L) return(list(wide = wide, dropped = character(0)))
  change <- abs(wide[-1L, , drop = FALSE] - wide[-nrow(wide), , drop = FALSE])
  repeated <- c(FALSE, apply(change, 1L, max) <= equal_tolerance(wide))
  list(wide = wide[!repeated, , drop = FALSE], dropped = rownames(wide)[repeated])
}

explained_by_id <- function(wide, ood, control, ranked) {
  # The OOD test sets left with (numerically) nothing once ID is regressed out.
  if (length(control) < 3L) return(character(0))
  x <- if (ranked) rank_average(control) else control
  explained <- vapply(ood, function(name) {
    y <- if (ranked) rank_average(wide[, name]) else wide[, name]
    residual <- linear_residuals(y, x)
    sqrt(sum(residual^2)) <= MIN_RESIDUAL_FRACTION * sqrt(sum((y - mean(y))^2))
  }, logical(1))
  ood[explained]
}

measurement_noise <- function(values, n_examples) {
  # Binomial sd sqrt(p (1 - p) / N) of an accuracy on N examples at its median; 0 when unknown or not a proportion.
  if (length(n_examples) != 1L || is.na(n_examples) || !is.finite(n_examples) || n_examples < 1) return(0)
  if (length(values) == 0L || min(values) < 0 || max(values) > 1) return(0)
  p <- stats::median(values)
  sqrt(max(p * (1 - p), 0) / n_examples)
}

longest_plateau <- function(values, tolerance) {
  # First and last index of the longest stretch of consecutive values whose range is at most `tolerance` (the
  # earliest of equally long ones).
  n <- length(values)
  best <- c(1L, 1L)
  for (first in seq_len(n)) {
    if (n - first + 1L <= best[[2]] - best[[1]] + 1L) break
    last <- first
    high <- low <- values[[first]]
    while (last < n) {
      value <- values[[last + 1L]]
      if (max(high, value) - min(low, value) > tolerance) break
      high <- max(high, value)
      low <- min(low, value)
      last <- last + 1L
    }
    if (last - first > best[[2]] - best[[1]]) best <- c(first, last)
  }
  best
}

same_wherever <- function(values, keys, tolerance) {
  # Whether `values` agree within `tolerance` at checkpoints that share a key (the same ID score).
  spread <- tapply(values, keys, function(v) max(v) - min(v))
  all(spread <= tolerance)
}

column_information <- function(x, control, steps, n_examples) {
  # Per OOD test set (column of x): its informative checkpoints and, when too few, why (one line).
  n <- nrow(x)
  id_keys <- round(control / equal_tolerance(control))
  distinct_id <- length(unique(id_keys))
  informative <- stats::setNames(integer(ncol(x)), colnames(x))
  reason <- stats::setNames(character(ncol(x)), colnames(x))
  for (name in colnames(x)) {
    values <- x[, name]
    noise <- measurement_noise(values, unname(n_examples[name]))
    tolerance <- max(noise, equal_tolerance(values))
    plateau <- longest_plateau(values, tolerance)
    length_plateau <- plateau[[2]] - plateau[[1]] + 1L
    count <- n - length_plateau + 1L
    why <- ""
    if (count < MINIMUM_INFORMATIVE) {
      within <- if (noise > 0) sprintf(" within measurement noise (\u00b1%.2g)", noise) else ""
      why <- sprintf("%s: %.3f on checkpoints %d\u2013%d (steps %s\u2013%s), %d of %d%s; nothing left to correlate",
                     name, stats::median(values[plateau[[1]]:plateau[[2]]]), plateau[[1]], plateau[[2]],
                     steps[[plateau[[1]]]], steps[[plateau[[2]]]], length_plateau, n, within)
    }
    distinct <- length(unique(round(values / equal_tolerance(values))))
    if (!nzchar(why) && distinct < 3L) {
      count <- min(count, distinct)
      shown <- utils::head(sort(unique(round(values, 6))), 2L)
      why <- sprintf("%s: takes only %d distinct values (%s) over %d checkpoints", name, distinct,
                     paste(sprintf("%.3f", shown), collapse = ", "), n)
    }
    if (!nzchar(why) && distinct_id < n && same_wherever(values, id_keys, tolerance)) {
      count <- min(count, distinct_id)
      if (count < MINIMUM_INFORMATIVE) {
        why <- sprintf(paste0("%s: a function of the ID score, which takes %d distinct values over %d checkpoints;",
                              " nothing left to correlate"), name, distinct_id, n)
      }
    }
    informative[[name]] <- as.integer(count)
    reason[[name]] <- why
  }
  list(informative = informative, reason = reason)
}

pair_distinct_rows <- function(x, control, first, second) {
  # Distinct (ID, a, b) rows of each pair (columns first[i], second[i] of x): checkpoint t repeats a row when an
  # earlier checkpoint has the same ID score and the same a and b (each within its equal_tolerance).
  n <- nrow(x)
  keys <- round(control / equal_tolerance(control))
  tolerance <- apply(x, 2L, equal_tolerance)
  repeated <- matrix(0, ncol(x), ncol(x))
  for (t in seq_len(n)[-1L]) {
    earlier <- which(keys[seq_len(t - 1L)] == keys[[t]])
    if (length(earlier) == 0L) next
    same <- abs(x[earlier, , drop = FALSE] - matrix(x[t, ], length(earlier), ncol(x), byrow = TRUE)) <=
      matrix(tolerance, length(earlier), ncol(x), byrow = TRUE)
    repeated <- repeated + (crossprod(same) > 0)
  }
  as.integer(n - repeated[cbind(first, second)])
}

# --- Leave one checkpoint out -----------------------------------------------------------------------------------

deletion_residuals <- function(y, control, opts) {
  # (n - 1) x n: column t holds the residuals of y without checkpoint t, the control refitted on the rest; NA
  # where y or the control is then constant or y a linear function of the control.
  n <- length(y)
  out <- matrix(NA_real_, n - 1L, n)
  for (t in seq_len(n)) {
    y_t <- y[-t]
    control_t <- control[-t]
    if (is_constant(y_t) || is_constant(control_t)) next
    if (opts$fit == "gam") {
      residual <- tryCatch(suppressWarnings(gam_residualise(y_t, control_t))$residuals, error = function(e) NULL)
    } else {
      if (opts$method == "spearman") {
        y_t <- rank_average(y_t)
        control_t <- rank_average(control_t)
      }
      residual <- linear_residuals(y_t, control_t)
    }
    if (is.null(residual) || anyNA(residual)) next
    if (sqrt(sum(residual^2)) <= MIN_RESIDUAL_FRACTION * sqrt(sum((y_t - mean(y_t))^2))) next
    out[, t] <- residual
  }
  out
}

deleted_correlations <- function(x, control, opts, first, second) {
  # n x pairs: each pair's partial correlation without checkpoint t (row t).
  residuals <- lapply(colnames(x), function(name) deletion_residuals(x[, name], control, opts))
  residual_method <- if (opts$fit == "gam") opts$method else "pearson"
  out <- matrix(NA_real_, nrow(x), length(first))
  for (t in seq_len(nrow(x))) {
    e <- vapply(residuals, function(matrix_t) matrix_t[, t], numeric(nrow(x) - 1L))
    r <- suppressWarnings(stats::cor(e, method = residual_method))
    out[t, ] <- r[cbind(first, second)]
  }
  out
}

directional_p <- function(statistic, df) {
  # Two-sided p of Student's t where the statistic lies on the side of the full estimate; 1 where it does not.
  if (is.finite(statistic) && statistic > 0 && is.finite(df) && df > 0) min(1, 2 * stats::pt(-statistic, df)) else 1
}

half_width <- function(se, df, level) {
  if (is.finite(se) && is.finite(df) && df > 0) stats::qt((1 + level) / 2, df) * se else NA_real_
}

clip_atanh <- function(r) atanh(pmin(pmax(r, -1 + 1e-15), 1 - 1e-15))

leave_one_out_test <- function(r, deleted, se, df, fisher_df, level, share = CARRYING_SHARE) {
  # The most influential deletion (the one removing the largest share of atanh r), that share, and the verdict
  # that survives every deletion carrying more than `share` of the estimate: the largest directional p over
  # the full estimate and those deletions, and the hull of their intervals on the Fisher-z scale. A deletion
  # has one checkpoint fewer: se_(-t) = se sqrt(f / (f - 1)) with f = n - 3 - k, on 1 / se_(-t)^2 + 1 df.
  pairs <- length(r)
  out <- list(p_max = rep(NA_real_, pairs), worst = rep(NA_integer_, pairs), influence = rep(NA_real_, pairs),
              low = rep(NA_real_, pairs), high = rep(NA_real_, pairs))
  for (j in seq_len(pairs)) {
    if (is.na(r[[j]])) next  # an untestable row has no estimate to delete from
    s <- if (r[[j]] < 0) -1 else 1
    z <- clip_atanh(r[[j]])
    f <- fisher_df[[j]]
    se_deleted <- if (is.finite(f) && f > 1) se[[j]] * sqrt(f / (f - 1)) else NA_real_
    df_deleted <- 1 / se_deleted^2 + 1
    half <- half_width(se[[j]], df[[j]], level)
    half_deleted <- half_width(se_deleted, df_deleted, level)
    if (!is.finite(half) || !is.finite(half_deleted)) next
    magnitude <- abs(z)
    out$p_max[[j]] <- directional_p(magnitude / se[[j]], df[[j]])
    low <- z - half
    high <- z + half
    if (magnitude > 1e-12) {
      z_deleted <- clip_atanh(deleted[, j])
      # A deletion without an estimate removes all of it (and leaves the sign open).
      directional <- ifelse(is.finite(z_deleted), s * z_deleted, -Inf)
      removed <- 1 - directional / magnitude
      # Shares within 1e-10 of the largest tie (repeated checkpoints): the earliest, as gengen's TIE_TOLERANCE.
      worst <- which(removed >= max(removed) - 1e-10)[[1]]
      out$worst[[j]] <- worst
      out$influence[[j]] <- if (is.finite(directional[[worst]])) removed[[worst]] else 1
      carrying <- removed > share
      if (any(carrying)) {
        weakest <- min(directional[carrying])
        out$p_max[[j]] <- max(out$p_max[[j]], directional_p(weakest / se_deleted, df_deleted))
        kept <- z_deleted[carrying]
        finite <- kept[is.finite(kept)]
        low <- min(low, finite - half_deleted)
        high <- max(high, finite + half_deleted)
        if (length(finite) < length(kept)) {
          # A carrying deletion without an estimate leaves the sign open: the hull spans 0, as its p = 1 says.
          low <- min(low, 0)
          high <- max(high, 0)
        }
      }
    }
    out$low[[j]] <- tanh(low)
    out$high[[j]] <- tanh(high)
  }
  out
}

t_test_se <- function(r, statistic, df) {
  # The standard error of atanh(r) that the t statistic implies (1 / sqrt(df) at r = 0).
  abs(ifelse(abs(r) > 1e-12, clip_atanh(r) / statistic, 1 / sqrt(df)))
}

# --- The pairs table of one group -------------------------------------------------------------------------------

PAIR_FIELDS <- c("testset_a", "testset_b", "n", "n_steps", "n_informative", "k", "r_raw", "r_partial",
                 "statistic", "df", "p_value", "p_loo_max", "influential_step", "influence", "p_adjusted",
                 "p_adjusted_from",
                 "significant", "ci_low", "ci_high", "testable", "untestable_reason", "ar_order_a", "ar_order_b",
                 "edf_a", "edf_b", "backend")

tested_pairs <- function(wide, tested, control, information, n_steps, opts, use_ppcor, level) {
  # Every column of the pairs of test sets that can be tested.
  n <- nrow(wide)
  residualise <- residual_cache(opts$fit, opts$method, control)
  pairs <- utils::combn(length(tested), 2L)
  names_a <- tested[pairs[1L, ]]
  names_b <- tested[pairs[2L, ]]
  results <- Map(function(name_a, name_b) {
    analyse_pair(wide[, name_a], wide[, name_b], control, name_a, name_b, opts, residualise, use_ppcor)
  }, names_a, names_b)
  column <- function(field) vapply(results, function(result) as.numeric(result[[field]]), numeric(1))
  table <- data.frame(testset_a = names_a, testset_b = names_b,
                      n = as.integer(column("n")), n_steps = as.integer(n_steps), k = as.integer(column("k")),
                      r_raw = column("r_raw"), r_partial = column("r_partial"), statistic = column("statistic"),
                      df = column("df"), p_value = column("p_value"), edf_a = column("edf_a"),
                      edf_b = column("edf_b"),
                      backend = vapply(results, function(result) result$backend, character(1)),
                      stringsAsFactors = FALSE, row.names = NULL)
  if (level == "run") {
    distinct <- pair_distinct_rows(wide[, tested, drop = FALSE], control, pairs[1L, ], pairs[2L, ])
    informative <- pmin(information$informative[names_a], information$informative[names_b], distinct)
    table$n_informative <- as.integer(informative)
    table$untestable_reason <- ifelse(
      informative < MINIMUM_INFORMATIVE,
      sprintf("%s and %s: %d informative of %d checkpoints (%d distinct (ID, %s, %s) rows); too few to test",
              names_a, names_b, as.integer(informative), n, distinct, names_a, names_b),
      "")
  } else {
    table$n_informative <- as.integer(n)
    table$untestable_reason <- ""
  }
  table$testable <- !nzchar(table$untestable_reason)
  lost <- !table$testable
  table[lost, c("r_partial", "statistic", "p_value", "edf_a", "edf_b")] <- NA_real_
  table$ar_order_a <- NA_integer_
  table$ar_order_b <- NA_integer_
  # gengen's AR-sieve runs on checkpoint trajectories of Pearson or Spearman analyses only.
  if (level == "run" && opts$method != "kendall") {
    max_order <- default_max_order(n)
    exogenous <- if (opts$method == "spearman" && opts$fit == "linear") rank_average(control) else control
    orders <- vapply(tested, function(name) {
      ar_order_aic(residualise(name, wide[, name])$residuals, exogenous, max_order)
    }, integer(1))
    table$ar_order_a <- ifelse(lost, NA_integer_, unname(orders[table$testset_a]))
    table$ar_order_b <- ifelse(lost, NA_integer_, unname(orders[table$testset_b]))
  }
  if (opts$method == "kendall") {
    table$ci_low <- NA_real_
    table$ci_high <- NA_real_
  } else {
    interval <- consistent_interval(table$r_partial, table$statistic, table$df, opts$ci_level)
    table$ci_low <- interval$low
    table$ci_high <- interval$high
  }
  table$p_loo_max <- NA_real_
  table$influential_step <- NA_real_
  table$influence <- NA_real_
  leave_one_out <- opts$leave_one_out && level == "run" && opts$method != "kendall" && n > MINIMUM_INFORMATIVE
  if (leave_one_out) {
    deleted <- deleted_correlations(wide[, tested, drop = FALSE], control, opts, pairs[1L, ], pairs[2L, ])
    se <- t_test_se(table$r_partial, table$statistic, table$df)
    loo <- leave_one_out_test(table$r_partial, deleted, se, table$df, table$df - 1, opts$ci_level)
    table$p_loo_max <- loo$p_max
    table$influential_step <- as.numeric(rownames(wide))[loo$worst]
    table$influence <- loo$influence
    hull <- is.finite(loo$low) & is.finite(table$ci_low)
    table$ci_low <- ifelse(hull, loo$low, table$ci_low)
    table$ci_high <- ifelse(hull, loo$high, table$ci_high)
    table$p_adjusted <- p.adjust(table$p_loo_max, method = opts$adjust)
    table$p_adjusted_from <- "p_loo_max"
  } else {
    table$p_adjusted <- p.adjust(table$p_value, method = opts$adjust)
    table$p_adjusted_from <- "p_value"
  }
  table$significant <- !is.na(table$p_adjusted) & table$p_adjusted < opts$alpha
  table[, PAIR_FIELDS]
}

untestable_rows <- function(wide, ood, information, n_steps, opts) {
  # One row per pair with a test set that holds too little information: the raw correlation and why.
  pairs <- utils::combn(length(ood), 2L)
  names_a <- ood[pairs[1L, ]]
  names_b <- ood[pairs[2L, ]]
  unusable <- stats::setNames(nzchar(information$reason), names(information$reason))
  keep <- unusable[names_a] | unusable[names_b]
  names_a <- names_a[keep]
  names_b <- names_b[keep]
  r_raw <- mapply(function(a, b) stats::cor(wide[, a], wide[, b], method = opts$method), names_a, names_b)
  rows <- length(names_a)
  missing <- rep(NA_real_, rows)
  data.frame(testset_a = names_a, testset_b = names_b, n = nrow(wide), n_steps = as.integer(n_steps),
             n_informative = as.integer(pmin(information$informative[names_a], information$informative[names_b])),
             k = 1L, r_raw = unname(r_raw), r_partial = missing, statistic = missing, df = missing,
             p_value = missing, p_loo_max = missing, influential_step = missing, influence = missing,
             p_adjusted = missing,
             p_adjusted_from = NA_character_, significant = FALSE, ci_low = missing, ci_high = missing,
             testable = FALSE,
             untestable_reason = unname(ifelse(unusable[names_a], information$reason[names_a],
                                               information$reason[names_b])),
             ar_order_a = NA_integer_, ar_order_b = NA_integer_, edf_a = missing, edf_b = missing,
             backend = NA_character_, stringsAsFactors = FALSE, row.names = NULL)
}

analyse_group <- function(wide, meta, opts, use_ppcor, level, n_examples = NULL) {
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
  # As gengen: rows lacking the ID or any OOD score are dropped; in a run, repeated checkpoints collapsed; OOD
  # test sets constant on the rest, or a linear function of ID, left out.
  wide <- wide[stats::complete.cases(wide[, c(opts$id, ood), drop = FALSE]), c(opts$id, ood), drop = FALSE]
  n_steps <- nrow(wide)
  if (level == "run") {
    collapsed <- collapse_repeats(wide)
    if (length(collapsed$dropped) > 0L) {
      warning(sprintf(paste0("%s: %d of %d checkpoints repeat the scores of the checkpoint before on every test",
                             " set (steps %s); analysed as %d distinct checkpoints"),
                      label, length(collapsed$dropped), n_steps, paste(collapsed$dropped, collapse = ", "),
                      nrow(collapsed$wide)), call. = FALSE)
    }
    wide <- collapsed$wide
  }
  constant <- ood[vapply(ood, function(name) is_constant(wide[, name]), logical(1))]
  if (length(constant) > 0L) {
    warning(label, ": ", length(constant), " OOD test set(s) constant (", paste(constant, collapse = ", "),
            "); left out", call. = FALSE)
    ood <- setdiff(ood, constant)
  }
  control <- wide[, opts$id]
  if (is_constant(control)) fail("--id ", opts$id, " is constant in ", label, "; nothing to regress out")
  linear <- explained_by_id(wide, ood, control, ranked = opts$method != "pearson")
  if (length(linear) > 0L) {
    warning(label, ": ", length(linear), " OOD test set(s) a linear function of ", opts$id, " (",
            paste(linear, collapse = ", "), "); left out", call. = FALSE)
    ood <- setdiff(ood, linear)
  }
  if (length(ood) < 2L) fail(label, ": fewer than two OOD test sets")
  information <- if (level == "run") {
    column_information(wide[, ood, drop = FALSE], control, rownames(wide), n_examples)
  } else {
    list(informative = stats::setNames(rep(nrow(wide), length(ood)), ood),
         reason = stats::setNames(rep("", length(ood)), ood))
  }
  for (reason in information$reason[nzchar(information$reason)]) {
    warning(label, ": ", reason, " (its ", length(ood) - 1L, " pairs are untestable)", call. = FALSE)
  }
  tested <- ood[!nzchar(information$reason)]
  parts <- list()
  if (length(tested) >= 2L) {
    parts$tested <- tested_pairs(wide, tested, control, information, n_steps, opts, use_ppcor, level)
  }
  if (any(nzchar(information$reason))) parts$untestable <- untestable_rows(wide, ood, information, n_steps, opts)
  table <- do.call(rbind, unname(parts))
  table <- table[order(match(table$testset_a, ood), match(table$testset_b, ood)), , drop = FALSE]
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
    # Each test set's examples: the median over the run's rows (gengen's measurement noise).
    n_examples <- if (is.null(rows$n_examples)) NULL else {
      tapply(rows$n_examples, rows$testset, function(count) stats::median(count, na.rm = TRUE))
    }
    analyse_group(wide_table(rows, rows$step), meta, opts, use_ppcor, "run", n_examples)
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

write_csv_utf8 <- function(table, path, quoted) {
  # write.csv's layout, in UTF-8 whatever the locale: write.csv translates to the native encoding, and in a C
  # locale the reasons' en dashes and plus-minus signs would become "<U+2013>".
  field <- function(values, quote) {
    text <- as.character(values)
    if (quote) text <- paste0("\"", gsub("\"", "\"\"", text, fixed = TRUE), "\"")
    ifelse(is.na(values), "NA", text)
  }
  header <- paste(field(names(table), TRUE), collapse = ",")
  body <- do.call(paste, c(unname(Map(field, table, quoted)), sep = ","))
  connection <- file(path, open = "wb")
  on.exit(close(connection))
  writeLines(enc2utf8(c(header, body)), connection, useBytes = TRUE)
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
  columns <- c("level", "model", cell_columns, "run", "testset_a", "testset_b", "metric", "n", "n_steps",
               "n_informative", "k", "r_raw", "r_partial", "statistic", "df", "p_value", "p_loo_max",
               "influential_step", "influence", "p_adjusted", "p_adjusted_from", "significant", "ci_low", "ci_high",
               "ci_level", "testable", "untestable_reason", "ar_order_a", "ar_order_b", "fit", "method",
               "inference", "backend", "edf_a", "edf_b")
  table <- table[, columns]
  rownames(table) <- NULL
  write_csv_utf8(format_numbers(table), opts$output, quoted = vapply(table, is.character, logical(1)))
  invisible(table)
}

if (sys.nframe() == 0L) main()
