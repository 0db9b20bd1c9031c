//! The distribution of Fleetwright's cost over Karpenter's across many cases: min, median and
//! max of the ratio, how many cases each side wins, and the five where Fleetwright is furthest
//! behind. A case where the two plans leave different pods pending is listed apart: their costs
//! price different work; it is run again on the pods Karpenter placed (`…@k-placed`), which is
//! compared as any other case.

use std::io::Write;

use super::Row;

pub fn print_distribution(out: &mut impl Write, rows: &[Row]) -> anyhow::Result<()> {
    let (comparable, apart): (Vec<&Row>, Vec<&Row>) = rows
        .iter()
        .partition(|r| !super::pending_differs(r) && r.karpenter.hourly > 0.0);
    let mut ratios: Vec<(f64, &Row)> = comparable
        .iter()
        .map(|r| (r.fleetwright.hourly / r.karpenter.hourly, *r))
        .collect();
    ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
    writeln!(
        out,
        "\nFleetwright/Karpenter $/h over {} case(s) placing the same pods ({} more placed different pods):",
        ratios.len(),
        apart.len()
    )?;
    if ratios.is_empty() {
        return Ok(());
    }
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize].0;
    let behind = ratios.iter().filter(|(r, _)| *r > 1.0 + 1e-4).count();
    let ahead = ratios.iter().filter(|(r, _)| *r < 1.0 - 1e-4).count();
    writeln!(
        out,
        "  min {:.3}  median {:.3}  max {:.3};  Fleetwright cheaper in {ahead}, dearer in {behind}, equal in {}",
        at(0.0),
        at(0.5),
        at(1.0),
        ratios.len() - ahead - behind
    )?;
    writeln!(out, "  the five furthest behind:")?;
    for (ratio, row) in ratios.iter().rev().take(5) {
        writeln!(
            out,
            "    {:<48} {:>5} pods  FW ${:.4}/h ({} nodes)  K ${:.4}/h ({} nodes)  {ratio:.3}",
            row.case,
            row.pods,
            row.fleetwright.hourly,
            row.fleetwright.nodes,
            row.karpenter.hourly,
            row.karpenter.nodes
        )?;
    }
    for row in apart {
        writeln!(
            out,
            "  apart: {} (pending: FW {}, K {})",
            row.case,
            row.fleetwright.unschedulable.len(),
            row.karpenter.unschedulable.len()
        )?;
    }
    Ok(())
}
