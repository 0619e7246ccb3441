//! A minimal column-major matrix of `f64`, the shape every kernel passes around.
//!
//! Columns are contiguous because every kernel works column by column (one test set's scores across
//! checkpoints), which keeps the hot loops on unit-stride slices.

use crate::error::{Result, StatsError};

#[derive(Debug, Clone, PartialEq)]
pub struct Mat {
    nrows: usize,
    ncols: usize,
    data: Vec<f64>,
}

impl Mat {
    /// A matrix from column-major data; `data.len()` must be `nrows * ncols`.
    pub fn from_col_major(nrows: usize, ncols: usize, data: Vec<f64>) -> Result<Self> {
        if data.len() != nrows * ncols {
            return Err(StatsError::invalid(
                "data",
                format!("{} values do not fill a {nrows} x {ncols} matrix", data.len()),
            ));
        }
        Ok(Mat { nrows, ncols, data })
    }

    /// A matrix from its columns, all of the same length.
    pub fn from_columns(nrows: usize, columns: &[&[f64]]) -> Result<Self> {
        let mut data = Vec::with_capacity(nrows * columns.len());
        for (j, column) in columns.iter().enumerate() {
            if column.len() != nrows {
                return Err(StatsError::invalid(
                    format!("column {j}"),
                    format!("has {} values, expected {nrows}", column.len()),
                ));
            }
            data.extend_from_slice(column);
        }
        Ok(Mat {
            nrows,
            ncols: columns.len(),
            data,
        })
    }

    pub fn zeros(nrows: usize, ncols: usize) -> Self {
        Mat {
            nrows,
            ncols,
            data: vec![0.0; nrows * ncols],
        }
    }

    pub fn filled(nrows: usize, ncols: usize, value: f64) -> Self {
        Mat {
            nrows,
            ncols,
            data: vec![value; nrows * ncols],
        }
    }

    pub fn nrows(&self) -> usize {
        self.nrows
    }

    pub fn ncols(&self) -> usize {
        self.ncols
    }

    pub fn col(&self, j: usize) -> &[f64] {
        &self.data[j * self.nrows..(j + 1) * self.nrows]
    }

    pub fn col_mut(&mut self, j: usize) -> &mut [f64] {
        &mut self.data[j * self.nrows..(j + 1) * self.nrows]
    }

    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[j * self.nrows + i]
    }

    pub fn set(&mut self, i: usize, j: usize, value: f64) {
        self.data[j * self.nrows + i] = value;
    }

    pub fn as_slice(&self) -> &[f64] {
        &self.data
    }

    pub fn into_vec(self) -> Vec<f64> {
        self.data
    }

    /// The rows `rows` (with repeats allowed) of every column: a resampled or permuted copy.
    pub fn gather_rows(&self, rows: &[usize]) -> Mat {
        let mut data = Vec::with_capacity(rows.len() * self.ncols);
        for j in 0..self.ncols {
            let column = self.col(j);
            data.extend(rows.iter().map(|&i| column[i]));
        }
        Mat {
            nrows: rows.len(),
            ncols: self.ncols,
            data,
        }
    }

    /// Columns `self` then `other`, side by side.
    pub fn hstack(&self, other: &Mat) -> Result<Mat> {
        if self.nrows != other.nrows {
            return Err(StatsError::invalid(
                "covar",
                format!("has {} rows but the data have {}", other.nrows, self.nrows),
            ));
        }
        let mut data = self.data.clone();
        data.extend_from_slice(&other.data);
        Ok(Mat {
            nrows: self.nrows,
            ncols: self.ncols + other.ncols,
            data,
        })
    }

    /// The transpose stored column-major, i.e. this matrix read row by row.
    pub fn transpose(&self) -> Mat {
        let mut out = Mat::zeros(self.ncols, self.nrows);
        for j in 0..self.ncols {
            for i in 0..self.nrows {
                out.set(j, i, self.get(i, j));
            }
        }
        out
    }
}

/// Dot product with four accumulators, which lets the compiler vectorise without changing results
/// between runs (the summation order is fixed).
#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f64; 4];
    let chunks = a.len() / 4;
    for c in 0..chunks {
        let i = 4 * c;
        acc[0] += a[i] * b[i];
        acc[1] += a[i + 1] * b[i + 1];
        acc[2] += a[i + 2] * b[i + 2];
        acc[3] += a[i + 3] * b[i + 3];
    }
    let mut tail = 0.0;
    for i in 4 * chunks..a.len() {
        tail += a[i] * b[i];
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

#[inline]
pub fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// Mean by two passes: the second pass removes most of the rounding error of the first, which matters
/// for scores carrying a large offset (1e8 + small variation).
pub fn mean(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let first = values.iter().sum::<f64>() / n;
    let correction = values.iter().map(|v| v - first).sum::<f64>() / n;
    first + correction
}

/// Writes `values` minus their mean into `out`.
///
/// The values are first shifted by the first one, which is exact for scores that carry a large common offset
/// (1e8 + small variation, by Sterbenz's lemma), and the mean of the small differences is removed from them:
/// the centred values are then accurate to the precision of the variation, not of the offset. Subtracting a
/// rounded mean directly would leave an error of one unit in the last place of the offset in every value.
pub fn centre_into(values: &[f64], out: &mut [f64]) {
    let shift = values.first().copied().unwrap_or(0.0);
    for (o, v) in out.iter_mut().zip(values) {
        *o = v - shift;
    }
    let centre = mean(out);
    for o in out.iter_mut() {
        *o -= centre;
    }
}

/// Fails with a message naming `name` when any value is NaN or infinite.
pub fn check_finite(name: &str, values: &[f64]) -> Result<()> {
    if let Some(position) = values.iter().position(|v| !v.is_finite()) {
        return Err(StatsError::invalid(
            name,
            format!(
                "contains a non-finite value ({}) at row {position}",
                values[position]
            ),
        ));
    }
    Ok(())
}

/// `K` m × m matrices filled pair by pair, `diagonal[q]` on the diagonal of matrix q: entry (a, b) of matrix q
/// is `values(a, b)[q]`, for every a ≠ b in row-major order when `ordered`, else for a < b and mirrored
/// to (b, a). The first error of `values` is returned.
pub fn pair_matrices<const K: usize>(
    m: usize,
    diagonal: [f64; K],
    ordered: bool,
    mut values: impl FnMut(usize, usize) -> Result<[f64; K]>,
) -> Result<[Mat; K]> {
    let mut out = diagonal.map(|value| {
        let mut matrix = Mat::zeros(m, m);
        for i in 0..m {
            matrix.set(i, i, value);
        }
        matrix
    });
    for a in 0..m {
        let others = if ordered { 0 } else { a + 1 };
        for b in (others..m).filter(|&b| b != a) {
            let entries = values(a, b)?;
            for (matrix, value) in out.iter_mut().zip(entries) {
                matrix.set(a, b, value);
                if !ordered {
                    matrix.set(b, a, value);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_and_transpose() {
        let m = Mat::from_col_major(3, 2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let g = m.gather_rows(&[2, 2, 0]);
        assert_eq!(g.col(0), &[3.0, 3.0, 1.0]);
        assert_eq!(g.col(1), &[6.0, 6.0, 4.0]);
        let t = m.transpose();
        assert_eq!(t.col(0), &[1.0, 4.0]);
        assert_eq!(t.get(1, 2), 6.0);
    }

    #[test]
    fn dot_matches_naive_sum() {
        let a: Vec<f64> = (0..11).map(|i| i as f64 * 0.5).collect();
        let b: Vec<f64> = (0..11).map(|i| 1.0 - i as f64).collect();
        let naive: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-12);
    }

    #[test]
    fn mean_with_large_offset() {
        let values = [1e8 + 0.1, 1e8 + 0.2, 1e8 + 0.3];
        assert!((mean(&values) - (1e8 + 0.2)).abs() < 1e-7);
    }

    #[test]
    fn centring_keeps_the_precision_of_the_variation() {
        // Offsets exactly representable next to 1e8, so the exact centred values are known.
        let values = [1e8 + 0.5, 1e8 - 0.25, 1e8 + 1.0];
        let mut out = [0.0; 3];
        centre_into(&values, &mut out);
        let exact: Vec<f64> = [0.5, -0.25, 1.0].iter().map(|d| d - 1.25 / 3.0).collect();
        for (a, b) in out.iter().zip(&exact) {
            assert!((a - b).abs() < 1e-15, "{out:?} vs {exact:?}");
        }
    }

    #[test]
    fn non_finite_is_named() {
        let err = check_finite("x", &[1.0, f64::NAN]).unwrap_err();
        assert_eq!(err.to_string(), "x: contains a non-finite value (NaN) at row 1");
    }
}
