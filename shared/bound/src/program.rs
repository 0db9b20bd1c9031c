//! The linear program itself, built from the columns and groups and solved by `microlp`.

use microlp::{
    ComparisonOp, LinearExpr, OptimizationDirection, Problem, SolutionStatus, SolveOutcome,
    Variable,
};

use fleetwright_core::labels::{RESOURCE_CPU, RESOURCE_EPHEMERAL, RESOURCE_MEMORY};

use crate::columns::Column;
use crate::groups::{requested, Group};
use crate::BoundError;

/// The program's optimum: the cheapest fractional fleet that holds every group.
/// Also returns the fractional node count of each column.
pub(crate) fn solve(columns: &[Column], groups: &[Group]) -> Result<(f64, Vec<f64>), BoundError> {
    if groups.is_empty() {
        return Ok((0.0, vec![0.0; columns.len()]));
    }
    let mut problem = Problem::new(OptimizationDirection::Minimize);
    let nodes: Vec<Variable> = columns
        .iter()
        .map(|c| problem.add_var(c.price, (0.0, f64::INFINITY)))
        .collect();
    let mut load: Vec<Vec<(usize, Variable)>> = vec![Vec::new(); columns.len()];
    for (g, group) in groups.iter().enumerate() {
        let mut all = LinearExpr::empty();
        for &j in &group.allowed {
            let n = problem.add_var(0.0, (0.0, group.count as f64));
            all.add(n, 1.0);
            load[j].push((g, n));
            if group.alone {
                problem.add_constraint([(n, 1.0), (nodes[j], -1.0)], ComparisonOp::Le, 0.0);
            }
        }
        problem.add_constraint(all, ComparisonOp::Eq, group.count as f64);
    }
    let names = requested(groups);
    for (j, column) in columns.iter().enumerate() {
        if load[j].is_empty() {
            continue;
        }
        for name in &names {
            let unit = scale(name);
            let mut expr = LinearExpr::empty();
            for &(g, n) in &load[j] {
                let d = groups[g].requests.get(name) as f64 / unit;
                if d > 0.0 {
                    expr.add(n, d);
                }
            }
            expr.add(nodes[j], -(column.capacity.get(name) as f64 / unit));
            problem.add_constraint(expr, ComparisonOp::Le, 0.0);
        }
    }
    match problem.solve() {
        Ok(SolveOutcome::Solution(s)) if s.status() == SolutionStatus::Optimal => Ok((
            s.objective(),
            nodes.iter().map(|&x| s.var_value(x)).collect(),
        )),
        Ok(other) => Err(BoundError::Solver(format!("no proven optimum: {other:?}"))),
        Err(e) => Err(BoundError::Solver(e.to_string())),
    }
}

/// Units that keep the coefficients near 1: cores and GiB.
fn scale(name: &str) -> f64 {
    match name {
        RESOURCE_CPU => 1000.0,
        RESOURCE_MEMORY | RESOURCE_EPHEMERAL => (1u64 << 30) as f64,
        _ => 1.0,
    }
}
