//! `plot.svg`, written by hand: two panels, no plotting dependency.
//!
//! - left: the sliding log's Redis µs per decision against the grants in its window (log scale), edgelimit's two
//!   sliding logs against Redisson's script (scenario 2): flat lines scale, a rising one does not;
//! - right: Redis µs per decision per algorithm, one bar per contender, with the `INCR`-in-a-script floor as a
//!   dashed line (scenario 1).
//!
//! A panel whose scenario did not run says so instead of drawing.

use std::fmt::Write as _;

use crate::contender::ContenderKind;
use crate::harness::BenchResults;
use crate::redis_cost::RedisCost;
use crate::scaling::{Scaling, ScalingRow};

const WIDTH: f64 = 1200.0;
const HEIGHT: f64 = 470.0;
/// Inside a panel: room for the axes' labels.
const MARGIN_LEFT: f64 = 64.0;
const MARGIN_TOP: f64 = 48.0;
const MARGIN_BOTTOM: f64 = 92.0;

/// Colours per contender (colour-blind-safe, after Okabe and Ito).
const EDGELIMIT_SERVER: &str = "#0072b2";
const EDGELIMIT_EXPLICIT: &str = "#56b4e9";
const EDGELIMIT_LAYOUT: &str = "#009e73";
const UPSTASH: &str = "#e69f00";
const REDISSON: &str = "#d55e00";

/// The SVG text.
pub fn svg(results: &BenchResults) -> String {
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} \
         {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\" aria-label=\"edgelimit benchmark: \
         sliding-log scaling and Redis cost per algorithm\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let left = Panel { x: 0.0, width: 500.0 };
    let right = Panel {
        x: 520.0,
        width: WIDTH - 520.0,
    };
    match &results.scaling {
        Some(scaling) => scaling_panel(&mut svg, &left, scaling),
        None => left.not_measured(&mut svg, "Sliding-log scaling"),
    }
    match &results.redis_cost {
        Some(cost) => cost_panel(&mut svg, &right, cost),
        None => right.not_measured(&mut svg, "Redis cost per decision"),
    }
    svg.push_str("</svg>\n");
    svg
}

/// A panel's horizontal place in the picture.
struct Panel {
    x: f64,
    width: f64,
}

impl Panel {
    fn plot_left(&self) -> f64 {
        self.x + MARGIN_LEFT
    }

    fn plot_right(&self) -> f64 {
        self.x + self.width - 12.0
    }

    fn plot_bottom(&self) -> f64 {
        HEIGHT - MARGIN_BOTTOM
    }

    /// The y of `value` on an axis from 0 to `top`.
    fn y(&self, value: f64, top: f64) -> f64 {
        self.plot_bottom() - value / top * (self.plot_bottom() - MARGIN_TOP)
    }

    fn title(&self, svg: &mut String, title: &str) {
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>",
            self.x + 12.0,
            escape(title)
        );
    }

    fn not_measured(&self, svg: &mut String, title: &str) {
        self.title(svg, title);
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" fill=\"#666\">not measured in this run</text>",
            self.plot_left(),
            HEIGHT / 2.0
        );
    }

    /// The y axis from 0 to `top` with horizontal grid lines, and its label.
    fn y_axis(&self, svg: &mut String, top: f64, step: f64, label: &str) {
        let mut value = 0.0;
        while value <= top + step / 2.0 {
            let y = self.y(value, top);
            let _ = writeln!(
                svg,
                "<line x1=\"{}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                self.plot_left(),
                self.plot_right(),
                self.plot_left() - 6.0,
                y + 4.0,
                trim_number(value)
            );
            value += step;
        }
        let (x, y) = (self.x + 16.0, (MARGIN_TOP + self.plot_bottom()) / 2.0);
        let _ = writeln!(
            svg,
            "<text x=\"{x}\" y=\"{y}\" text-anchor=\"middle\" transform=\"rotate(-90 {x} {y})\">{}</text>",
            escape(label)
        );
        let _ = writeln!(
            svg,
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>\
             <line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"#333\"/>",
            self.plot_left(),
            MARGIN_TOP,
            self.plot_bottom(),
            self.plot_right()
        );
    }

    /// A row of legend entries under the plot.
    fn legend(&self, svg: &mut String, entries: &[(&str, &str)]) {
        let y = HEIGHT - 22.0;
        let mut x = self.plot_left();
        for (label, colour) in entries {
            let _ = writeln!(
                svg,
                "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{colour}\"/>\
                 <text x=\"{}\" y=\"{y}\">{}</text>",
                y - 10.0,
                x + 16.0,
                escape(label)
            );
            x += 24.0 + 7.0 * label.chars().count() as f64;
        }
    }
}

/// One line of the scaling panel: (grants in the window, µs per decision) per rate.
struct Series {
    label: &'static str,
    colour: &'static str,
    points: Vec<(u64, f64)>,
}

fn scaling_panel(svg: &mut String, panel: &Panel, scaling: &Scaling) {
    panel.title(svg, "Sliding log: Redis µs per decision as the log grows");
    let line = |label, colour, micros: fn(&ScalingRow) -> f64| Series {
        label,
        colour,
        points: scaling.rows.iter().map(|row| (row.rate, micros(row))).collect(),
    };
    let series = [
        line("edgelimit (family)", EDGELIMIT_SERVER, |row| {
            row.family.micros_per_decision
        }),
        line("edgelimit (Redisson layout)", EDGELIMIT_LAYOUT, |row| {
            row.redisson_layout.micros_per_decision
        }),
        line("Redisson", REDISSON, |row| row.redisson.micros_per_decision),
    ];
    let highest = series
        .iter()
        .flat_map(|line| line.points.iter().map(|&(_, micros)| micros))
        .fold(0.0, f64::max);
    let (top, step) = nice_axis(highest);
    panel.y_axis(svg, top, step, "Redis µs per decision");
    // Log x axis over whole decades around the rates measured.
    let rates = || scaling.rows.iter().map(|row| row.rate.max(1) as f64);
    let first_decade = rates().fold(f64::INFINITY, f64::min).log10().floor();
    let last_decade = rates().fold(1.0, f64::max).log10().ceil().max(first_decade + 1.0);
    let x = |rate: f64| {
        let share = (rate.log10() - first_decade) / (last_decade - first_decade);
        panel.plot_left() + 16.0 + share * (panel.plot_right() - panel.plot_left() - 32.0)
    };
    let mut decade = first_decade;
    while decade <= last_decade {
        let tick = x(10f64.powf(decade));
        let _ = writeln!(
            svg,
            "<line x1=\"{tick:.1}\" y1=\"{0}\" x2=\"{tick:.1}\" y2=\"{1}\" stroke=\"#333\"/>\
             <text x=\"{tick:.1}\" y=\"{2}\" text-anchor=\"middle\">{3}</text>",
            panel.plot_bottom(),
            panel.plot_bottom() + 5.0,
            panel.plot_bottom() + 19.0,
            trim_number(10f64.powf(decade))
        );
        decade += 1.0;
    }
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">grants in the window (rate per interval, log scale)</text>",
        (panel.plot_left() + panel.plot_right()) / 2.0,
        panel.plot_bottom() + 38.0
    );
    for Series { colour, points, .. } in &series {
        let path: Vec<String> = points
            .iter()
            .map(|&(rate, micros)| format!("{:.1},{:.1}", x(rate as f64), panel.y(micros, top)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2.5\"/>",
            path.join(" ")
        );
        for &(rate, micros) in points {
            let _ = writeln!(
                svg,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{colour}\">\
                 <title>{rate}: {micros:.2} µs</title></circle>",
                x(rate as f64),
                panel.y(micros, top)
            );
        }
    }
    let legend: Vec<(&str, &str)> = series.iter().map(|line| (line.label, line.colour)).collect();
    panel.legend(svg, &legend);
}

fn cost_panel(svg: &mut String, panel: &Panel, cost: &RedisCost) {
    panel.title(svg, "Redis µs per decision, per algorithm and contender");
    // Per algorithm: edgelimit on both clocks, then the peer where there is one.
    let groups: Vec<(&str, Vec<(f64, &str)>)> = cost
        .algorithms
        .iter()
        .map(|row| {
            let mut bars = vec![
                (row.server_clock.decision.micros_per_decision, EDGELIMIT_SERVER),
                (row.explicit_time.decision.micros_per_decision, EDGELIMIT_EXPLICIT),
            ];
            if let Some(peer) = &row.peer {
                bars.push((peer.cost.decision.micros_per_decision, peer_colour(peer.kind)));
            }
            (row.algorithm.as_str(), bars)
        })
        .collect();
    let floor = cost.floor.script.decision.micros_per_decision;
    let highest = groups
        .iter()
        .flat_map(|(_, bars)| bars.iter().map(|&(micros, _)| micros))
        .fold(floor, f64::max);
    let (top, step) = nice_axis(highest);
    panel.y_axis(svg, top, step, "Redis µs per decision");
    let group_width = (panel.plot_right() - panel.plot_left()) / groups.len().max(1) as f64;
    let bar_width = (group_width - 14.0) / 3.0;
    for (i, (algorithm, bars)) in groups.iter().enumerate() {
        let group_left = panel.plot_left() + i as f64 * group_width + 7.0;
        for (j, &(micros, colour)) in bars.iter().enumerate() {
            let y = panel.y(micros, top);
            let _ = writeln!(
                svg,
                "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{bar_width:.1}\" height=\"{:.1}\" fill=\"{colour}\">\
                 <title>{}: {micros:.2} µs</title></rect>",
                group_left + j as f64 * bar_width,
                panel.plot_bottom() - y,
                escape(algorithm)
            );
        }
        let centre = group_left + 1.5 * bar_width;
        for (line, words) in wrap(algorithm, 15).iter().enumerate() {
            let _ = writeln!(
                svg,
                "<text x=\"{centre:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
                panel.plot_bottom() + 16.0 + 13.0 * line as f64,
                escape(words)
            );
        }
    }
    let floor_y = panel.y(floor, top);
    let _ = writeln!(
        svg,
        "<line x1=\"{}\" y1=\"{floor_y:.1}\" x2=\"{}\" y2=\"{floor_y:.1}\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>\
         <text x=\"{}\" y=\"38\" font-size=\"11\">dashed: the floor, INCR in a one-line script ({floor:.2} µs)</text>",
        panel.plot_left(),
        panel.plot_right(),
        panel.x + 12.0
    );
    panel.legend(
        svg,
        &[
            ("edgelimit, server clock", EDGELIMIT_SERVER),
            ("edgelimit, explicit time", EDGELIMIT_EXPLICIT),
            ("@upstash/ratelimit", UPSTASH),
            ("Redisson", REDISSON),
        ],
    );
}

fn peer_colour(kind: ContenderKind) -> &'static str {
    match kind {
        ContenderKind::Redisson => REDISSON,
        _ => UPSTASH,
    }
}

/// An axis top above `highest` and a tick step of 1, 2 or 5 × 10ⁿ giving about five ticks.
fn nice_axis(highest: f64) -> (f64, f64) {
    let highest = if highest.is_finite() && highest > 0.0 {
        highest
    } else {
        1.0
    };
    let rough = highest / 5.0;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|&step| step >= rough)
        .unwrap_or(10.0 * magnitude);
    ((highest / step).ceil() * step, step)
}

/// `value` without a trailing `.0`, with thin grouping for thousands.
fn trim_number(value: f64) -> String {
    if value >= 1000.0 && value.fract() == 0.0 {
        let digits = format!("{value:.0}");
        let mut grouped = String::new();
        for (i, digit) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push('\u{2009}');
            }
            grouped.push(digit);
        }
        grouped
    } else {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// `text` in lines of at most about `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// `text` safe inside XML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_on_round_numbers() {
        assert_eq!(nice_axis(47.0), (50.0, 10.0));
        assert_eq!(nice_axis(0.9), (1.0, 0.2));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
    }

    #[test]
    fn labels_wrap_and_numbers_read_well() {
        assert_eq!(
            wrap("sliding log, Redisson layout", 13),
            ["sliding log,", "Redisson", "layout"]
        );
        assert_eq!(trim_number(100_000.0), "100\u{2009}000");
        assert_eq!(trim_number(2.5), "2.5");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
