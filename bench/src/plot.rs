//! `plot.svg`, drawn with plotters: the sliding logs' Redis µs per decision as the log grows (scenario 2), and Redis
//! µs per decision per algorithm and contender against the `INCR`-in-a-script floor (scenario 1).

use std::error::Error;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::contender::ContenderKind;
use crate::harness::BenchResults;
use crate::redis_cost::{AlgorithmCost, RedisCost};
use crate::scaling::{Scaling, ScalingRow};

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), Box<dyn Error>>;

// Colour-blind-safe colours (Okabe and Ito).
const SERVER: RGBColor = RGBColor(0x00, 0x72, 0xb2);
const EXPLICIT: RGBColor = RGBColor(0x56, 0xb4, 0xe9);
const LAYOUT: RGBColor = RGBColor(0x00, 0x9e, 0x73);
const UPSTASH: RGBColor = RGBColor(0xe6, 0x9f, 0x00);
const REDISSON: RGBColor = RGBColor(0xd5, 0x5e, 0x00);

/// The SVG text: two panels; one whose scenario did not run says so.
pub fn svg(results: &BenchResults) -> Result<String, String> {
    let mut svg = String::new();
    draw(&mut svg, results).map_err(|e| format!("could not draw plot.svg: {e}"))?;
    Ok(svg)
}

fn draw(svg: &mut String, results: &BenchResults) -> Drawn {
    let root = SVGBackend::with_string(svg, (1200, 470)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(500);
    match &results.scaling {
        Some(scaling) => scaling_panel(&left, scaling)?,
        None => not_measured(&left, "Sliding-log scaling")?,
    }
    match &results.redis_cost {
        Some(cost) => cost_panel(&right, cost)?,
        None => not_measured(&right, "Redis cost per decision")?,
    }
    root.present()?;
    Ok(())
}

fn not_measured(area: &Area, title: &str) -> Drawn {
    let area = area.titled(title, ("sans-serif", 16))?;
    area.draw(&Text::new("not measured in this run", (60, 200), ("sans-serif", 13)))?;
    Ok(())
}

fn scaling_panel(area: &Area, scaling: &Scaling) -> Drawn {
    type Micros = fn(&ScalingRow) -> f64;
    let series: [(&str, RGBColor, Micros); 3] = [
        ("edgelimit (family)", SERVER, |row| row.family.micros_per_decision),
        ("edgelimit (Redisson layout)", LAYOUT, |row| {
            row.redisson_layout.micros_per_decision
        }),
        ("Redisson", REDISSON, |row| row.redisson.micros_per_decision),
    ];
    let rates = || scaling.rows.iter().map(|row| row.rate.max(1) as f64);
    let (low, high) = (rates().fold(f64::INFINITY, f64::min), rates().fold(1.0, f64::max));
    let top = (scaling.rows.iter())
        .flat_map(|row| series.map(|(_, _, micros)| micros(row)))
        .fold(1e-3, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Sliding log: Redis µs per decision as the log grows",
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((low.min(high / 10.0)..high).log_scale(), 0.0..top * 1.1)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_desc("grants in the window (rate per interval, log scale)")
        .y_desc("Redis µs per decision")
        .x_label_formatter(&|rate| format!("{rate:.0}"))
        .draw()?;
    for (label, colour, micros) in series {
        let points = scaling.rows.iter().map(|row| (row.rate.max(1) as f64, micros(row)));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)).point_size(4))?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    Ok(())
}

/// Horizontal bars, one group per algorithm from the top: edgelimit on both clocks, then its peer if it has one.
fn cost_panel(area: &Area, cost: &RedisCost) -> Drawn {
    let rows = cost.algorithms.len();
    let floor = cost.floor.script.decision.micros_per_decision;
    let micros = |row: &AlgorithmCost, kind| match kind {
        ContenderKind::EdgelimitServerClock => Some(row.server_clock.decision.micros_per_decision),
        ContenderKind::EdgelimitExplicitTime => Some(row.explicit_time.decision.micros_per_decision),
        _ => (row.peer.as_ref())
            .filter(|peer| peer.kind == kind)
            .map(|peer| peer.cost.decision.micros_per_decision),
    };
    let series = [
        (ContenderKind::EdgelimitServerClock, SERVER),
        (ContenderKind::EdgelimitExplicitTime, EXPLICIT),
        (ContenderKind::Upstash, UPSTASH),
        (ContenderKind::Redisson, REDISSON),
    ];
    let top = (cost.algorithms.iter())
        .flat_map(|row| series.map(|(kind, _)| micros(row, kind).unwrap_or(0.0)))
        .fold(floor.max(1e-3), f64::max);
    let names: Vec<&str> = cost.algorithms.iter().rev().map(|row| row.algorithm.as_str()).collect();
    // The y axis in hundredths of a group, so that integer key points can label the groups' centres.
    let height = 100 * rows as i32;
    let centres = (0..height).step_by(100).map(|y| y + 50).collect();
    let mut chart = ChartBuilder::on(area)
        .caption("Redis µs per decision, per algorithm and contender", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(180)
        .build_cartesian_2d(0.0..top * 1.1, (0..height).with_key_points(centres))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(WHITE)
        .x_desc("Redis µs per decision")
        .y_label_formatter(&|y| names.get(*y as usize / 100).copied().unwrap_or_default().to_owned())
        .draw()?;
    for (slot, (kind, colour)) in series.into_iter().enumerate() {
        let bars = cost.algorithms.iter().enumerate().filter_map(|(i, row)| {
            let top = 100 * (rows - i) as i32 - 10 - 27 * slot.min(2) as i32;
            let bar = [(0.0, top - 25), (micros(row, kind)?, top)];
            Some(Rectangle::new(bar, colour.filled()))
        });
        chart
            .draw_series(bars)?
            .label(kind.label())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    let dashed = BLACK.stroke_width(1);
    chart
        .draw_series(DashedLineSeries::new([(floor, 0), (floor, height)], 6, 4, dashed))?
        .label(format!("floor: INCR in a one-line script ({floor:.2} µs)"))
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 10, y)], dashed));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    Ok(())
}
