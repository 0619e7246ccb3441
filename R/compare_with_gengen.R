#!/usr/bin/env Rscript
# compare_with_gengen.R -- diff R/gengen_analyse.R's pairs table against gengen's, column by column.
#
# Usage:
#   Rscript R/compare_with_gengen.R pairs-r.csv default/pairs.csv t-test/pairs.csv
#
#   pairs-r.csv        Rscript R/gengen_analyse.R scores.csv pairs-r.csv [options]
#   default/pairs.csv  gengen analyse scores.csv --out default [the same options]
#   t-test/pairs.csv   gengen analyse scores.csv --out t-test --inference t-test [the same options]
#
# gengen's default inference (the AR-sieve bootstrap) is resampling-based: its p_sieve, se_z, df_sieve, its
# leave-one-out p_loo_max and its ci_low/ci_high are not reproduced in R, and its p_adjusted adjusts the sieve's
# p_loo_max. So the deterministic columns (the correlations, the t-test, the AR orders and what each row can
# tell: n, n_steps, n_informative, testable, untestable_reason) are compared with the default run, and the
# t-test's verdict (p_loo_max, influential_step, p_adjusted and what it adjusts, significant, the interval) with
# the `--inference t-test` run. Run the R script with the same --leave-one-out / --no-leave-one-out as that
# run. Rows are matched on (model, run, testset_a, testset_b). Prints one line per column with the largest
# difference, and exits with status 1 when a column disagrees beyond
#   |R - gengen| <= 1e-10 |gengen| + 1e-12   r_raw, r_partial, ci_low, ci_high (correlations, in [-1, 1])
#   |R - gengen| <= 1e-8 |gengen| + 1e-12    statistic, p_value, p_loo_max, p_adjusted (they amplify r's rounding)
#   exactly                                  n, n_steps, n_informative, k, df, ar_order_a, ar_order_b,
#                                            influential_step; testable, significant (TRUE/FALSE);
#                                            untestable_reason, p_adjusted_from (text, empty = NA)
# (NA must match NA). Two deletions can leave the same estimate to rounding (often so on ranks, for spearman):
# then R and gengen may name different ones of the tied steps as influential_step, and this script reports it.

DEFAULT_COLUMNS <- c("n", "n_steps", "n_informative", "k", "r_raw", "r_partial", "statistic", "df", "p_value",
                     "ar_order_a", "ar_order_b", "testable", "untestable_reason")
T_TEST_COLUMNS <- c("p_loo_max", "influential_step", "p_adjusted", "p_adjusted_from", "significant", "ci_low",
                    "ci_high")
EXACT_COLUMNS <- c("n", "n_steps", "n_informative", "k", "df", "ar_order_a", "ar_order_b", "influential_step")
LOGICAL_COLUMNS <- c("testable", "significant")
TEXT_COLUMNS <- c("untestable_reason", "p_adjusted_from")
KEY <- c("model", "run", "testset_a", "testset_b")
CORRELATION_COLUMNS <- c("r_raw", "r_partial", "ci_low", "ci_high")
ATOL <- 1e-12

fail <- function(...) {
  cat("compare_with_gengen.R: error: ", ..., "\n", sep = "", file = stderr())
  quit(save = "no", status = 2)
}

read_pairs <- function(path) {
  if (!file.exists(path)) fail(path, ": no such file")
  table <- read.csv(path, stringsAsFactors = FALSE, check.names = FALSE, encoding = "UTF-8",
                    colClasses = c(model = "character", run = "character"))
  missing_columns <- setdiff(c(KEY, DEFAULT_COLUMNS, T_TEST_COLUMNS), names(table))
  if (length(missing_columns) > 0L) fail(path, ": missing column(s) ", paste(missing_columns, collapse = ", "))
  # Text as written: an empty field (gengen) and NA (R) both mean "none"; True/TRUE are the same truth value.
  for (column in TEXT_COLUMNS) table[[column]] <- ifelse(is.na(table[[column]]), "", as.character(table[[column]]))
  for (column in LOGICAL_COLUMNS) table[[column]] <- as.logical(as.character(table[[column]]))
  # gengen's pair order is its column order; put each unordered pair the way the R script writes it.
  swap <- table$testset_a > table$testset_b
  first <- table$testset_a
  table$testset_a[swap] <- table$testset_b[swap]
  table$testset_b[swap] <- first[swap]
  table
}

compare <- function(r_pairs, gengen, columns, what) {
  merged <- merge(r_pairs[, c(KEY, columns)], gengen[, c(KEY, columns)], by = KEY, suffixes = c(".r", ".g"))
  if (nrow(merged) != nrow(r_pairs) || nrow(merged) != nrow(gengen)) {
    cat(sprintf("%s: %d rows in R, %d in gengen, %d matched\n", what, nrow(r_pairs), nrow(gengen), nrow(merged)))
    return(FALSE)
  }
  ok <- TRUE
  for (column in columns) {
    if (column %in% c(TEXT_COLUMNS, LOGICAL_COLUMNS)) {
      r_text <- as.character(merged[[paste0(column, ".r")]])
      g_text <- as.character(merged[[paste0(column, ".g")]])
      bad <- !((is.na(r_text) & is.na(g_text)) | (!is.na(r_text) & !is.na(g_text) & r_text == g_text))
      cat(sprintf("%-17s %-10s %d of %d rows differ%s\n", column, what, sum(bad), nrow(merged),
                  if (any(bad)) sprintf("  DIFFERS in %d rows", sum(bad)) else ""))
      ok <- ok && !any(bad)
      next
    }
    r_values <- as.numeric(merged[[paste0(column, ".r")]])
    g_values <- as.numeric(merged[[paste0(column, ".g")]])
    both_na <- is.na(r_values) & is.na(g_values)
    difference <- abs(r_values - g_values)
    rtol <- if (column %in% EXACT_COLUMNS) 0 else if (column %in% CORRELATION_COLUMNS) 1e-10 else 1e-8
    tolerance <- if (column %in% EXACT_COLUMNS) 0 else rtol * abs(g_values) + ATOL
    bad <- !both_na & (is.na(difference) | difference > tolerance)
    largest <- if (all(both_na)) 0 else max(difference[!both_na], na.rm = TRUE)
    cat(sprintf("%-17s %-10s max |R - gengen| = %.3g over %d rows%s\n", column, what, largest, nrow(merged),
                if (any(bad)) sprintf("  DIFFERS in %d rows", sum(bad)) else ""))
    ok <- ok && !any(bad)
  }
  ok
}

main <- function() {
  args <- commandArgs(trailingOnly = TRUE)
  if (length(args) != 3L) {
    fail("usage: Rscript R/compare_with_gengen.R pairs-r.csv default/pairs.csv t-test/pairs.csv")
  }
  r_pairs <- read_pairs(args[[1]])
  default <- read_pairs(args[[2]])
  t_test <- read_pairs(args[[3]])
  agree <- compare(r_pairs, default, DEFAULT_COLUMNS, "(default)")
  agree <- compare(r_pairs, t_test, T_TEST_COLUMNS, "(t-test)") && agree
  cat(if (agree) "R and gengen agree on every deterministic column\n" else "R and gengen DIFFER\n")
  quit(save = "no", status = if (agree) 0L else 1L)
}

if (sys.nframe() == 0L) main()
