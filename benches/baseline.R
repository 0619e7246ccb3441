# R baselines for benches/compare.py: the loops an R user would write (ggm::pcor per permutation or resample,
# mgcv::gam per column). Run by compare.py as `Rscript baseline.R <folder> resampling|gam`; reads the raw
# little-endian arrays compare.py wrote into <folder>, runs for the time budget in meta.json, writes its
# results as raw doubles and prints one JSON line (seconds per call, calls made, setup memory).

args <- commandArgs(trailingOnly = TRUE)
folder <- args[1]
task <- args[2]

read_array <- function(name, what = "double") {
  shape <- scan(file.path(folder, paste0(name, ".shape")), quiet = TRUE)
  count <- if (length(shape)) prod(shape) else 1
  size <- if (what == "double") 8 else 4
  values <- readBin(file.path(folder, paste0(name, ".bin")), what, n = count, size = size, endian = "little")
  # compare.py writes C order (last index fastest): reverse the dimensions for R's column-major arrays
  if (length(shape) > 1) array(values, dim = rev(shape)) else values
}
write_array <- function(values, name) {
  writeBin(as.double(values), file.path(folder, paste0(name, ".out")), size = 8, endian = "little")
}
peak_kb <- function() {
  status <- readLines("/proc/self/status")
  as.numeric(gsub("[^0-9]", "", status[grepl("^VmHWM", status)]))
}
json_number <- function(x) format(x, digits = 10, scientific = TRUE)
meta_text <- paste(readLines(file.path(folder, "meta.json")), collapse = "")
meta_number <- function(key) as.numeric(sub(paste0('.*"', key, '": ([0-9.e+-]+).*'), "\\1", meta_text))
budget <- meta_number("loop_budget")

if (task == "resampling") {
  suppressMessages(library(ggm))
  scores <- read_array("scores")     # dims (m, n, runs)
  covar <- read_array("covar")       # dims (1, n, runs)
  perm_idx <- read_array("loop_perm_idx", "integer") + 1L   # dims (n, P): column p is permutation p
  boot_idx <- read_array("loop_boot_idx", "integer") + 1L   # dims (n, B)
  loop_runs <- meta_number("loop_runs")
  m <- dim(scores)[1]
  n_perm <- ncol(perm_idx)
  n_boot <- if (length(dim(boot_idx)) == 2) ncol(boot_idx) else 0
  setup <- peak_kb()
  seconds <- c(obs = 0, perm = 0, boot = 0)
  calls <- c(obs = 0, perm = 0, boot = 0)
  observed <- c()
  r_star <- c()
  r_boot <- c()
  begin <- proc.time()[["elapsed"]]
  done <- FALSE
  for (run in seq_len(loop_runs)) {
    for (a in 1:(m - 1)) {
      for (b in (a + 1):m) {
        x <- scores[a, , run]; y <- scores[b, , run]; z <- covar[1, , run]
        start <- proc.time()[["elapsed"]]
        observed <- c(observed, pcor(c(1, 2, 3), var(cbind(x, y, z))))
        fit <- lm.fit(cbind(1, z), y)
        resid <- fit$residuals
        fitted <- y - resid
        seconds["obs"] <- seconds["obs"] + proc.time()[["elapsed"]] - start
        calls["obs"] <- calls["obs"] + 1
        start <- proc.time()[["elapsed"]]
        row <- vapply(seq_len(n_perm), function(p) {
          pcor(c(1, 2, 3), var(cbind(x, fitted + resid[perm_idx[, p]], z)))
        }, numeric(1))
        seconds["perm"] <- seconds["perm"] + proc.time()[["elapsed"]] - start
        calls["perm"] <- calls["perm"] + n_perm
        r_star <- c(r_star, row)
        if (n_boot > 0) {
          data <- cbind(x, y, z)
          start <- proc.time()[["elapsed"]]
          row <- vapply(seq_len(n_boot), function(i) pcor(c(1, 2, 3), var(data[boot_idx[, i], ])), numeric(1))
          seconds["boot"] <- seconds["boot"] + proc.time()[["elapsed"]] - start
          calls["boot"] <- calls["boot"] + n_boot
          r_boot <- c(r_boot, row)
        }
        if (proc.time()[["elapsed"]] - begin > budget) { done <- TRUE; break }
      }
      if (done) break
    }
    if (done) break
  }
  write_array(observed, "observed")
  write_array(r_star, "r_star")
  write_array(r_boot, "r_boot")
  per <- seconds / pmax(calls, 1)
  cat(sprintf('{"setup_rss_kb": %s, "per_call": {"obs": %s, "perm": %s, "boot": %s}, "calls": {"obs": %d, "perm": %d, "boot": %d}, "shape": [%d, %d, %d]}\n',
              json_number(setup), json_number(per["obs"]), json_number(per["perm"]), json_number(per["boot"]),
              as.integer(calls["obs"]), as.integer(calls["perm"]), as.integer(calls["boot"]),
              length(observed), n_perm, n_boot))
} else if (task == "gam") {
  suppressMessages(library(mgcv))
  y <- read_array("y")               # dims (columns, n)
  control <- read_array("control")
  setup <- peak_kb()
  residuals <- c()
  scores <- c()
  begin <- proc.time()[["elapsed"]]
  columns <- 0
  for (j in seq_len(dim(y)[1])) {
    target <- y[j, ]
    fit <- gam(target ~ s(control, k = 10, bs = "cr"), method = "GCV.Cp")
    residuals <- c(residuals, residuals(fit))
    scores <- c(scores, fit$gcv.ubre)
    columns <- columns + 1
    if (proc.time()[["elapsed"]] - begin > budget) break
  }
  per <- (proc.time()[["elapsed"]] - begin) / columns
  write_array(residuals, "residuals")
  write_array(scores, "score")
  cat(sprintf('{"setup_rss_kb": %s, "per_call": {"column": %s}, "calls": {"column": %d}, "shape": [%d, %d]}\n',
              json_number(setup), json_number(per), as.integer(columns), columns, length(control)))
}
