//! The small dense linear algebra a least-squares fit needs: solving a symmetric system and
//! inverting it (Gaussian elimination with partial pivoting; a handful of unknowns).

/// A square matrix, row-major.
pub(crate) type Matrix = Vec<Vec<f64>>;

/// Solves `a · x = b`; `None` when `a` is singular.
pub(crate) fn solve(a: &Matrix, b: &[f64]) -> Option<Vec<f64>> {
    let n = b.len();
    let mut m: Matrix = a
        .iter()
        .zip(b)
        .map(|(row, value)| {
            let mut row = row.clone();
            row.push(*value);
            row
        })
        .collect();
    let scale = a
        .iter()
        .flatten()
        .fold(0.0f64, |acc, v| acc.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))?;
        if m[pivot][col].abs() <= scale * 1e-13 {
            return None;
        }
        m.swap(col, pivot);
        for row in col + 1..n {
            let factor = m[row][col] / m[col][col];
            let pivot_row = m[col].clone();
            for (cell, above) in m[row].iter_mut().zip(&pivot_row).skip(col) {
                *cell -= factor * above;
            }
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let tail: f64 = (row + 1..n).map(|k| m[row][k] * x[k]).sum();
        x[row] = (m[row][n] - tail) / m[row][row];
    }
    Some(x)
}

/// The inverse of `a`; `None` when it is singular.
pub(crate) fn inverse(a: &Matrix) -> Option<Matrix> {
    let n = a.len();
    let mut columns = Vec::with_capacity(n);
    for i in 0..n {
        let unit: Vec<f64> = (0..n).map(|j| if i == j { 1.0 } else { 0.0 }).collect();
        columns.push(solve(a, &unit)?);
    }
    Some(
        (0..n)
            .map(|r| (0..n).map(|c| columns[c][r]).collect())
            .collect(),
    )
}

/// `Jᵀ·J` and `Jᵀ·r` of a Jacobian with one row per residual.
pub(crate) fn normal_equations(jacobian: &[Vec<f64>], residuals: &[f64]) -> (Matrix, Vec<f64>) {
    let p = jacobian.first().map_or(0, Vec::len);
    let mut jtj = vec![vec![0.0; p]; p];
    let mut jtr = vec![0.0; p];
    for (row, r) in jacobian.iter().zip(residuals) {
        for i in 0..p {
            jtr[i] += row[i] * r;
            for j in 0..p {
                jtj[i][j] += row[i] * row[j];
            }
        }
    }
    (jtj, jtr)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn solves_and_inverts_a_small_system() {
        let a = vec![vec![4.0, 1.0], vec![1.0, 3.0]];
        let x = solve(&a, &[1.0, 2.0]).unwrap();
        assert!((4.0 * x[0] + x[1] - 1.0).abs() < 1e-12);
        assert!((x[0] + 3.0 * x[1] - 2.0).abs() < 1e-12);
        let inv = inverse(&a).unwrap();
        assert!((inv[0][0] - 3.0 / 11.0).abs() < 1e-12);
        assert!(solve(&vec![vec![1.0, 2.0], vec![2.0, 4.0]], &[1.0, 1.0]).is_none());
    }
}
