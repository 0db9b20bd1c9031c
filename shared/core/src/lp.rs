//! The LP lower bound on the hourly cost of new capacity: fractional nodes at the best price per
//! resource. Solves min Σ pₜxₜ s.t. Σ aₜᵣxₜ ≥ bᵣ, x ≥ 0 through its dual (k variables, one per
//! resource) with a dictionary simplex and Bland's rule, so it is exact and deterministic.

/// One candidate node shape: usable resources (already normalised) and its hourly price.
#[derive(Clone, Debug)]
pub struct Column {
    pub capacity: Vec<f64>,
    pub price: f64,
}

/// The solution: the bound, the fractional node count of each column, and the shadow price of
/// each demanded resource (the dual: what one more unit of it would add to the cost).
#[derive(Clone, Debug, Default)]
pub struct LpSolution {
    pub cost: f64,
    pub counts: Vec<f64>,
    pub prices: Vec<f64>,
}

const EPS: f64 = 1e-9;

/// Minimises the cost of covering `demand` with fractional columns. Returns None when some
/// demanded resource is offered by no column.
pub fn solve(demand: &[f64], columns: &[Column]) -> Option<LpSolution> {
    let k = demand.len();
    let m = columns.len();
    for (r, b) in demand.iter().enumerate() {
        if *b > EPS && columns.iter().all(|c| c.capacity[r] <= EPS) {
            return None;
        }
    }
    if demand.iter().all(|b| *b <= EPS) {
        return Some(LpSolution {
            cost: 0.0,
            counts: vec![0.0; m],
            prices: vec![0.0; k],
        });
    }
    // Dual: max b·y  s.t.  A y ≤ p. Variables 0..k are y, k..k+m are slacks.
    // Dictionary rows: basic_i = rhs_i − Σ_j d[i][j]·nonbasic_j.
    let mut d: Vec<Vec<f64>> = columns.iter().map(|c| c.capacity.clone()).collect();
    let mut rhs: Vec<f64> = columns.iter().map(|c| c.price).collect();
    let mut basic: Vec<usize> = (k..k + m).collect();
    let mut nonbasic: Vec<usize> = (0..k).collect();
    let mut obj: Vec<f64> = demand.to_vec();
    let mut value = 0.0;
    for _ in 0..(50 * (m + k)) {
        // Bland: entering = nonbasic with positive reduced cost and smallest variable index.
        let entering = (0..k)
            .filter(|&j| obj[j] > EPS)
            .min_by_key(|&j| nonbasic[j]);
        let Some(j) = entering else { break };
        let leaving = (0..m).filter(|&i| d[i][j] > EPS).min_by(|&a, &b| {
            (rhs[a] / d[a][j])
                .total_cmp(&(rhs[b] / d[b][j]))
                .then(basic[a].cmp(&basic[b]))
        });
        let i = leaving?; // an unbounded dual means an infeasible primal
        pivot(&mut d, &mut rhs, &mut obj, &mut value, i, j);
        std::mem::swap(&mut basic[i], &mut nonbasic[j]);
    }
    // Primal values: x_t is minus the reduced cost of slack t when it is nonbasic.
    let mut counts = vec![0.0; m];
    for (j, var) in nonbasic.iter().enumerate() {
        if *var >= k {
            counts[var - k] = (-obj[j]).max(0.0);
        }
    }
    // Dual values: y_r is its row's right-hand side when basic, zero when not.
    let mut prices = vec![0.0; k];
    for (i, var) in basic.iter().enumerate() {
        if *var < k {
            prices[*var] = rhs[i].max(0.0);
        }
    }
    Some(LpSolution {
        cost: value,
        counts,
        prices,
    })
}

fn pivot(
    d: &mut [Vec<f64>],
    rhs: &mut [f64],
    obj: &mut [f64],
    value: &mut f64,
    i: usize,
    j: usize,
) {
    let k = obj.len();
    let p = d[i][j];
    // Row i: nonbasic_j = rhs_i/p − Σ_{l≠j} d[i][l]/p·nb_l − (1/p)·basic_i
    let mut row = d[i].clone();
    for (l, cell) in row.iter_mut().enumerate() {
        *cell = if l == j { 1.0 / p } else { *cell / p };
    }
    let r = rhs[i] / p;
    for (ii, line) in d.iter_mut().enumerate() {
        if ii == i {
            continue;
        }
        let f = line[j];
        if f.abs() <= 0.0 {
            continue;
        }
        for l in 0..k {
            line[l] = if l == j {
                -f * row[j]
            } else {
                line[l] - f * row[l]
            };
        }
        rhs[ii] -= f * r;
    }
    let f = obj[j];
    for l in 0..k {
        obj[l] = if l == j {
            -f * row[j]
        } else {
            obj[l] - f * row[l]
        };
    }
    *value += f * r;
    d[i] = row;
    rhs[i] = r;
}

#[cfg(test)]
#[path = "../tests/unit/lp.rs"]
mod tests;
