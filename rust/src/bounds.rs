//! Size limits checked before the binding layer allocates or loops: a request too large for the machine is an
//! `InvalidArgumentError` saying how much it would take, never an abort (a failed allocation), a capacity
//! overflow panic or a call that runs for days.
//!
//! The limits are documented in `gengen.stats` (`MAX_RESAMPLES`, `MAX_ARRAY_BYTES`, `max_threads()`), which
//! checks the same bounds first with the machine's memory in view.

use crate::error::StatsError;

/// Most permutations, bootstrap replicates or simulation replicates one call accepts: a p-value resolution of
/// 1e-7 is finer than any multiple-testing correction needs, and 10^7 resamples already take minutes.
pub const MAX_RESAMPLES: u64 = 10_000_000;

/// Most bytes one array built by the binding (index tables, bootstrap replicates, simulated data) may take.
pub const MAX_ARRAY_BYTES: u128 = 16 << 30;

/// Threads asked for beyond the machine's CPUs are allowed up to this many (a rayon pool with a million
/// threads never finishes starting).
const MIN_THREAD_CAP: usize = 256;

/// The most threads a call accepts: 256 or the number of CPUs, whichever is larger.
pub fn max_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus.max(MIN_THREAD_CAP)
}

/// `value` if it is at least `minimum` and at most [`MAX_RESAMPLES`].
pub fn check_resamples(name: &str, value: u64, minimum: u64) -> Result<u64, StatsError> {
    if value < minimum {
        return Err(StatsError::invalid(
            name,
            format!("must be at least {minimum}, got {value}"),
        ));
    }
    if value > MAX_RESAMPLES {
        return Err(StatsError::invalid(
            name,
            format!("{value} is above the limit of {MAX_RESAMPLES} resamples per call (a p-value resolution of 1e-7)"),
        ));
    }
    Ok(value)
}

/// The number of elements of an array of `counts` multiplied together, each `bytes_each` bytes, or an error
/// saying how much memory it would take when that is above [`MAX_ARRAY_BYTES`] (or overflows).
pub fn check_array(name: &str, counts: &[usize], bytes_each: usize, what: &str) -> Result<usize, StatsError> {
    let elements = counts
        .iter()
        .try_fold(1u128, |total, &count| total.checked_mul(count as u128));
    let bytes = elements.and_then(|e| e.checked_mul(bytes_each as u128));
    match (elements, bytes) {
        (Some(elements), Some(bytes)) if bytes <= MAX_ARRAY_BYTES => Ok(elements as usize),
        (_, bytes) => Err(StatsError::invalid(
            name,
            format!(
                "{what} would take {} of memory, above the limit of {}",
                bytes.map_or_else(|| "more than 2^128 bytes".to_string(), human_bytes),
                human_bytes(MAX_ARRAY_BYTES)
            ),
        )),
    }
}

/// A vector of `len` copies of `value`, allocated without aborting the process when memory runs out.
pub fn try_filled<T: Clone>(name: &str, len: usize, value: T) -> Result<Vec<T>, StatsError> {
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| StatsError::invalid(name, format!("cannot allocate {} elements: out of memory", len)))?;
    out.resize(len, value);
    Ok(out)
}

/// An empty vector with room for `len` elements, or an error instead of an abort when memory runs out.
pub fn try_with_capacity<T>(name: &str, len: usize) -> Result<Vec<T>, StatsError> {
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| StatsError::invalid(name, format!("cannot allocate {} elements: out of memory", len)))?;
    Ok(out)
}

/// `n_threads` if it is between 1 and [`max_threads`].
pub fn check_threads(count: usize) -> Result<usize, StatsError> {
    let cap = max_threads();
    if count == 0 {
        return Err(StatsError::invalid("n_threads", "must be at least 1"));
    }
    if count > cap {
        return Err(StatsError::invalid(
            "n_threads",
            format!("{count} is above the limit of {cap} threads (256 or the number of CPUs, whichever is larger)"),
        ));
    }
    Ok(count)
}

/// Bytes in binary units with three significant digits: "8.0 TiB".
pub fn human_bytes(bytes: u128) -> String {
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_beyond_the_limit_or_overflowing_are_refused() {
        assert_eq!(check_array("n", &[4, 5], 8, "x").unwrap(), 20);
        let overflow = check_array("n", &[1 << 62, 5], 8, "an index table").unwrap_err();
        assert!(overflow.to_string().contains("n: an index table would take"));
        let huge = check_array("n_boot", &[1_000_000, 1_000_000], 8, "the table").unwrap_err();
        assert!(huge.to_string().contains("7.3 TiB"), "{huge}");
    }

    #[test]
    fn resample_and_thread_limits() {
        assert!(check_resamples("n_perm", 1 << 40, 1).is_err());
        assert!(check_resamples("n_perm", 0, 1).is_err());
        assert_eq!(check_resamples("n_perm", 999, 1).unwrap(), 999);
        assert!(check_threads(1_000_000).is_err());
        assert!(check_threads(0).is_err());
        assert_eq!(check_threads(2).unwrap(), 2);
    }

    #[test]
    fn bytes_read_as_binary_units() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(16 << 30), "16.0 GiB");
    }
}
