use super::*;

fn col(cap: &[f64], price: f64) -> Column {
    Column {
        capacity: cap.to_vec(),
        price,
    }
}

#[test]
fn single_resource_picks_best_ratio() {
    let s = solve(&[10.0], &[col(&[2.0], 1.0), col(&[4.0], 1.5)]).unwrap();
    assert!((s.cost - 3.75).abs() < 1e-9, "{}", s.cost);
    assert!((s.counts[1] - 2.5).abs() < 1e-9);
}

#[test]
fn two_resources_mix_two_columns_at_their_shadow_prices() {
    // cpu-heavy and memory-heavy shapes; demand needs both.
    let cols = [
        col(&[4.0, 1.0], 1.0),
        col(&[1.0, 4.0], 1.0),
        col(&[4.0, 4.0], 3.0),
    ];
    let s = solve(&[10.0, 10.0], &cols).unwrap();
    assert!((s.cost - 4.0).abs() < 1e-9, "{}", s.cost);
    // The shadow prices. Strong duality: b·y equals the cost; each used column is priced exactly.
    let by = 10.0 * s.prices[0] + 10.0 * s.prices[1];
    assert!((by - s.cost).abs() < 1e-9, "{by} vs {}", s.cost);
    for c in &cols[..2] {
        let worth = c.capacity[0] * s.prices[0] + c.capacity[1] * s.prices[1];
        assert!((worth - c.price).abs() < 1e-9, "{worth}");
    }
}

#[test]
fn missing_resource_is_infeasible() {
    assert!(solve(&[1.0, 1.0], &[col(&[1.0, 0.0], 1.0)]).is_none());
}
