# Reference computations in R for gengen's cross-validation tests (tests/r/test_*.py call these through rpy2).
#
# Every function takes a data matrix X whose columns are x, y, z1, ..., zk (k = ncol(X) - 2, possibly 0) and
# returns a named list of plain numbers, computed with base R and the CRAN packages ggm, psych and corpcor
# (and ppcor when it is installed). Nothing here calls gengen.

ranked <- function(X) apply(X, 2L, rank, ties.method = "average")

covariates <- function(X) {
  k <- ncol(X) - 2L
  if (k == 0L) NULL else X[, 3:(2L + k), drop = FALSE]
}

residualised <- function(v, Z) if (is.null(Z)) v - mean(v) else unname(lm.fit(cbind(1, Z), v)$residuals)

# Base R: residuals of x and y on [1, Z] from lm.fit (lm's QR, without the formula overhead), their
# correlation from cor.test. cor.test's t uses n - 2 degrees of freedom; the partial correlation's test uses
# n - 2 - k, so its t is rescaled by sqrt((n - 2 - k) / (n - 2)) (exactly r sqrt((n - 2 - k) / (1 - r^2))).
# Spearman: the same on average ranks of every column (ppcor's definition). The semi-partial correlations are
# cor(x, ry) (covariates removed from y only, ppcor's spcor.test(x, y, z)) and cor(rx, y).
reference_lm <- function(X, method) {
  if (method == "spearman") X <- ranked(X)
  n <- nrow(X)
  k <- ncol(X) - 2L
  Z <- covariates(X)
  rx <- residualised(X[, 1L], Z)
  ry <- residualised(X[, 2L], Z)
  test <- cor.test(rx, ry)
  df <- n - 2 - k
  statistic <- unname(test$statistic) * sqrt(df / (n - 2))
  semi <- function(a, b) {
    r <- cor(a, b)
    t <- r * sqrt(df / (1 - r * r))
    c(r, t, 2 * pt(-abs(t), df))
  }
  semi_y <- semi(X[, 1L], ry)
  semi_x <- semi(rx, X[, 2L])
  list(r = unname(test$estimate), statistic = statistic, p_value = 2 * pt(-abs(statistic), df), df = df,
       cor_test_p = test$p.value,
       semi_y_r = semi_y[[1]], semi_y_statistic = semi_y[[2]], semi_y_p = semi_y[[3]],
       semi_x_r = semi_x[[1]], semi_x_statistic = semi_x[[2]], semi_x_p = semi_x[[3]])
}

# ggm: the partial correlation from the inverse of the correlation matrix C (Pearson; of the ranks for
# Spearman; the Kendall tau-b matrix for Kendall) and ggm::pcor.test's t-test with df = n - 2 - k.
# ggm::pcor accepts a covariance matrix too, but solve() then refuses the scale cases (columns scaled
# 1e-3..1e6 give a covariance matrix with reciprocal condition number ~1e-18), so it gets the correlation
# matrix; the partial correlation is the same. For Kendall the test is ppcor's normal approximation
# (reference_kendall_test), which ggm lacks.
reference_ggm <- function(C, n, method) {
  k <- ncol(C) - 2L
  r <- ggm::pcor(seq_len(ncol(C)), C)
  if (method == "kendall") {
    test <- reference_kendall_test(r, n, k)
    return(list(r = r, statistic = test[["statistic"]], p_value = test[["p_value"]]))
  }
  test <- ggm::pcor.test(r, k, n)
  list(r = r, statistic = test$tval, p_value = test$pvalue, df = test$df)
}

# ppcor's test for a (semi-)partial Kendall tau given k covariates, written from its documented formula:
# z = tau / sqrt(2 (2 (n - k) + 5) / (9 (n - k) (n - 1 - k))), p = 2 P(Z > |z|).
reference_kendall_test <- function(r, n, k) {
  statistic <- r / sqrt(2 * (2 * (n - k) + 5) / (9 * (n - k) * (n - 1 - k)))
  c(statistic = statistic, p_value = 2 * pnorm(-abs(statistic)))
}

# The semi-partial correlation of column i with column j, the remaining columns removed from column j only,
# from the precision matrix P of a correlation (or covariance) matrix C. With pr the partial correlation
# -P[i, j] / sqrt(P[i, i] P[j, j]) and 1 / (P[i, i] - P[i, j]^2 / P[j, j]) the variance of column i's residual
# on the remaining columns, sr = pr sqrt(residual variance of i / C[i, i]). Used for Kendall (tau-b matrix),
# where no R package other than ppcor gives it; checked against lm for Pearson.
semi_from_matrix <- function(C, i, j) {
  P <- solve(C)
  pr <- -P[i, j] / sqrt(P[i, i] * P[j, j])
  pr / sqrt(C[i, i] * (P[i, i] - P[i, j]^2 / P[j, j]))
}

reference_kendall <- function(X, tau) {
  n <- nrow(X)
  k <- ncol(X) - 2L
  semi_y <- if (k == 0L) tau[1L, 2L] else semi_from_matrix(tau, 1L, 2L)
  semi_x <- if (k == 0L) tau[1L, 2L] else semi_from_matrix(tau, 2L, 1L)
  list(semi_y_r = semi_y, semi_y_p = reference_kendall_test(semi_y, n, k)[["p_value"]],
       semi_x_r = semi_x, semi_x_p = reference_kendall_test(semi_x, n, k)[["p_value"]],
       pearson_semi_y_from_matrix = if (k == 0L) cor(X)[1L, 2L] else semi_from_matrix(cor(X), 1L, 2L))
}

# psych::partial.r(X, x = 1:2, y = covariates) and corpcor::cor2pcor (the full partial-correlation matrix).
reference_psych <- function(X, method) {
  colnames(X) <- paste0("v", seq_len(ncol(X)))
  pr <- psych::partial.r(X, c(1L, 2L), 3:ncol(X), method = method)
  list(r = unname(pr[1L, 2L]))
}

reference_corpcor <- function(C) list(r = corpcor::cor2pcor(C)[1L, 2L])

# The m x m semi-partial correlation matrix in ppcor's orientation, sr[i, j] = cor(X[, i], residual of X[, j]
# on the columns other than i and j), from lm, with its t-test (df = n - m).
reference_semi_matrix <- function(X) {
  m <- ncol(X)
  n <- nrow(X)
  sr <- diag(m)
  for (j in seq_len(m)) {
    for (i in seq_len(m)) {
      if (i == j) next
      others <- if (m > 2L) X[, -c(i, j), drop = FALSE] else NULL
      sr[i, j] <- cor(X[, i], residualised(X[, j], others))
    }
  }
  df <- n - m
  statistic <- sr * sqrt(df / (1 - sr^2))
  p_value <- 2 * pt(-abs(statistic), df)
  diag(statistic) <- 0
  diag(p_value) <- 0
  list(estimate = sr, statistic = statistic, p_value = p_value)
}

# ppcor's pcor() matrices from corpcor::cor2pcor(C): the partial correlation of every pair given all other
# columns, with the t-test (df = n - m) or, for Kendall, the normal approximation, k = m - 2.
reference_pcor_matrix <- function(C, n, method) {
  m <- ncol(C)
  k <- m - 2
  estimate <- unname(corpcor::cor2pcor(C))
  diag(estimate) <- 1
  if (method == "kendall") {
    statistic <- estimate / sqrt(2 * (2 * (n - k) + 5) / (9 * (n - k) * (n - 1 - k)))
    p_value <- 2 * pnorm(-abs(statistic))
  } else {
    statistic <- estimate * sqrt((n - 2 - k) / (1 - estimate^2))
    p_value <- 2 * pt(-abs(statistic), n - 2 - k)
  }
  diag(statistic) <- 0
  diag(p_value) <- 0
  list(estimate = estimate, statistic = statistic, p_value = p_value)
}

# Everything for one data set, in one call (rpy2 round trips and Kendall's O(n^2) are the slow parts, so the
# three correlation matrices are computed once). A reference that fails in R (solve() on an exactly or
# computationally singular matrix) is returned as list(error = message) for the test to judge.
guarded <- function(expr) {
  tryCatch(suppressWarnings(expr), error = function(e) list(error = conditionMessage(e)))
}

reference_case <- function(X) {
  n <- nrow(X)
  k <- ncol(X) - 2L
  pearson <- cor(X)
  spearman <- cor(ranked(X))
  kendall <- cor(X, method = "kendall")
  out <- list(
    lm_pearson = guarded(reference_lm(X, "pearson")),
    lm_spearman = guarded(reference_lm(X, "spearman")),
    ggm_pearson = guarded(reference_ggm(pearson, n, "pearson")),
    ggm_spearman = guarded(reference_ggm(spearman, n, "spearman")),
    ggm_kendall = guarded(reference_ggm(kendall, n, "kendall")),
    kendall = guarded(reference_kendall(X, kendall)),
    cor_kendall = list(r = cor(X[, 1L], X[, 2L], method = "kendall")),
    corpcor_pearson = guarded(reference_corpcor(pearson)),
    corpcor_kendall = guarded(reference_corpcor(kendall)),
    pcor_pearson = guarded(reference_pcor_matrix(pearson, n, "pearson")),
    pcor_kendall = guarded(reference_pcor_matrix(kendall, n, "kendall")),
    spcor_pearson = guarded(reference_semi_matrix(X)),
    spcor_spearman = guarded(reference_semi_matrix(ranked(X)))
  )
  if (k >= 1L) {
    out$psych_pearson <- guarded(reference_psych(X, "pearson"))
    out$psych_spearman <- guarded(reference_psych(X, "spearman"))
  }
  out
}

# ppcor itself, when installed: pcor.test and spcor.test for (x, y | z) and pcor on the whole matrix. ppcor
# inverts the covariance matrix, so solve() can refuse badly scaled columns; that comes back as
# list(error = message). Where the determinant of that matrix is below machine epsilon ppcor replaces the
# inverse by MASS::ginv (with a warning); `ginv` says whether pcor.test did.
reference_ppcor <- function(X, method) guarded(ppcor_calls(X, method))

ppcor_calls <- function(X, method) {
  x <- X[, 1L]
  y <- X[, 2L]
  Z <- covariates(X)
  ginv <- FALSE
  pt_ <- withCallingHandlers(
    ppcor::pcor.test(x, y, Z, method = method),
    warning = function(w) if (grepl("Moore-Penrose", conditionMessage(w), fixed = TRUE)) ginv <<- TRUE
  )
  sp <- ppcor::spcor.test(x, y, Z, method = method)
  whole <- ppcor::pcor(X, method = method)
  list(r = pt_$estimate, statistic = pt_$statistic, p_value = pt_$p.value,
       semi_y_r = sp$estimate, semi_y_statistic = sp$statistic, semi_y_p = sp$p.value,
       pcor_estimate = unname(whole$estimate), pcor_p_value = unname(whole$p.value),
       ginv = as.numeric(ginv))  # a number: rpy2 hands logical vectors back as named lists
}

# A GAM control fitted directly with mgcv, for checking R/gengen_analyse.R --fit gam: residuals of a and b on
# s(control, k = 10, bs = "cr") by GCV.Cp, their correlation, and each smooth's EDF (total EDF minus the
# intercept).
gam_pair <- function(a, b, control) {
  fit <- function(v) mgcv::gam(v ~ s(control, k = 10, bs = "cr"), method = "GCV.Cp",
                               data = data.frame(v = v, control = control))
  fa <- fit(a)
  fb <- fit(b)
  list(r = cor(residuals(fa), residuals(fb)), edf_a = sum(fa$edf) - 1, edf_b = sum(fb$edf) - 1,
       gcv_a = fa$gcv.ubre, gcv_b = fb$gcv.ubre)
}
