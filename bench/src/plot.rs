//! Throughput–p99 plots as SVG: one panel per workload (e.g. text and
//! binary), one polyline per server, a dashed line at the p99 SLA; and
//! latency CDFs ([`cdf_svg`]). Written by hand (a few lines of SVG) rather
//! than with a plotting crate.

use std::fmt::Write as _;
use std::path::Path;

/// One server's curve: `(achieved ops/s, p99 µs)` points in load order.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The legend.
    pub label: String,
    /// An SVG colour.
    pub color: String,
    /// `(achieved ops/s, p99 µs)`.
    pub points: Vec<(f64, f64)>,
}

/// One panel: a title and its curves.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Shown above the panel, e.g. `text`.
    pub title: String,
    /// The curves.
    pub curves: Vec<Curve>,
}

/// The SVG document: panels side by side, p99 (µs, clipped at 10 × the
/// SLA) against achieved ops/s.
pub fn p99_svg(panels: &[Panel], sla_us: f64) -> String {
    let (width, height, margin) = (900.0, 420.0, 60.0);
    let panel_width = (width - margin) / panels.len().max(1) as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for (index, panel) in panels.iter().enumerate() {
        let x0 = margin + index as f64 * panel_width;
        let points = || panel.curves.iter().flat_map(|c| c.points.iter());
        let max_x = points().map(|p| p.0).fold(1.0, f64::max) * 1.05;
        let max_y = points()
            .map(|p| p.1.min(10.0 * sla_us))
            .fold(sla_us, f64::max)
            * 1.1;
        let sx = |v: f64| x0 + (v / max_x) * (panel_width - 40.0);
        let sy = |v: f64| height - margin - (v.min(max_y) / max_y) * (height - 2.0 * margin);
        let _ = writeln!(
            svg,
            "<text x=\"{x0}\" y=\"20\">{}: p99 (us) against achieved ops/s</text>",
            panel.title
        );
        let _ = writeln!(
            svg,
            "<line x1=\"{x0}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"black\"/>",
            height - margin,
            x0 + panel_width - 40.0
        );
        let _ = writeln!(
            svg,
            "<line x1=\"{x0}\" y1=\"{}\" x2=\"{x0}\" y2=\"{margin}\" stroke=\"black\"/>",
            height - margin
        );
        let _ = writeln!(
            svg,
            "<line x1=\"{x0}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"grey\" stroke-dasharray=\"4\"/><text x=\"{2}\" y=\"{3}\">p99 SLA {sla_us} us</text>",
            sy(sla_us),
            x0 + panel_width - 40.0,
            x0 + 4.0,
            sy(sla_us) - 4.0
        );
        let _ = writeln!(
            svg,
            "<text x=\"{x0}\" y=\"{0}\">0</text><text x=\"{1}\" y=\"{0}\">{max_x:.0}</text>",
            height - margin + 16.0,
            x0 + panel_width - 90.0
        );
        for (n, curve) in panel.curves.iter().enumerate() {
            draw_curve(
                &mut svg,
                curve,
                |(x, y)| (sx(x), sy(y)),
                (x0 + 10.0, 40.0 + 16.0 * n as f64),
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// Appends `curve` as a polyline (its points through `scale` to SVG
/// coordinates) and its legend at `legend`.
fn draw_curve(
    svg: &mut String,
    curve: &Curve,
    scale: impl Fn((f64, f64)) -> (f64, f64),
    legend: (f64, f64),
) {
    let points: Vec<String> = curve
        .points
        .iter()
        .map(|&point| {
            let (x, y) = scale(point);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let _ = writeln!(
        svg,
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>",
        curve.color,
        points.join(" ")
    );
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>",
        legend.0, legend.1, curve.color, curve.label
    );
}

/// Writes [`p99_svg`] to `path`.
pub fn write_p99_svg(panels: &[Panel], sla_us: f64, path: &Path) -> Result<(), String> {
    std::fs::write(path, p99_svg(panels, sla_us))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The CDF of `samples` as `(value, fraction at or below it)` points,
/// one per sample in ascending order.
pub fn cdf_points(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    sorted
        .into_iter()
        .enumerate()
        .map(|(i, value)| (value, (i + 1) as f64 / n))
        .collect()
}

/// One panel of CDFs (`curves`' points from [`cdf_points`], in µs), the
/// x axis up to the largest 90th percentile × 1.5, where the curves
/// differ (the tails beyond are clipped: the p99 keys carry them).
pub fn cdf_svg(title: &str, curves: &[Curve]) -> String {
    cdf_svg_of(title, "round trips", "us", curves)
}

/// [`cdf_svg`] of `what` (e.g. `runs`) measured in `unit` (e.g. `ms`).
pub fn cdf_svg_of(title: &str, what: &str, unit: &str, curves: &[Curve]) -> String {
    let (width, height, margin) = (900.0, 420.0, 60.0);
    let p90 = |curve: &Curve| {
        let index = (curve.points.len() * 9 / 10).min(curve.points.len().saturating_sub(1));
        curve.points.get(index).map_or(0.0, |p| p.0)
    };
    let max_x = curves.iter().map(p90).fold(1.0, f64::max) * 1.5;
    let sx = |v: f64| margin + (v.min(max_x) / max_x) * (width - 2.0 * margin);
    let sy = |f: f64| height - margin - f * (height - 2.0 * margin);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let _ = writeln!(
        svg,
        "<text x=\"{margin}\" y=\"20\">{title}: fraction of {what} at or below ({unit})</text>"
    );
    let _ = writeln!(
        svg,
        "<line x1=\"{margin}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"black\"/><line x1=\"{margin}\" y1=\"{0}\" x2=\"{margin}\" y2=\"{margin}\" stroke=\"black\"/>",
        height - margin,
        width - margin
    );
    let _ = writeln!(
        svg,
        "<text x=\"{margin}\" y=\"{0}\">0</text><text x=\"{1}\" y=\"{0}\">{max_x:.0} {unit}</text><text x=\"20\" y=\"{margin}\">1.0</text>",
        height - margin + 16.0,
        width - margin - 50.0
    );
    for (n, curve) in curves.iter().enumerate() {
        draw_curve(
            &mut svg,
            curve,
            |(x, f)| (sx(x), sy(f)),
            (
                width - margin - 260.0,
                height - margin - 20.0 - 16.0 * n as f64,
            ),
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_have_their_curves_legends_and_the_sla_line() {
        let panel = |title: &str| Panel {
            title: title.to_owned(),
            curves: vec![
                Curve {
                    label: "linux".to_owned(),
                    color: "#d62728".to_owned(),
                    points: vec![(1000.0, 300.0), (2000.0, 900.0)],
                },
                Curve {
                    label: "ebbflow".to_owned(),
                    color: "#1f77b4".to_owned(),
                    points: vec![(1000.0, 200.0)],
                },
            ],
        };
        let svg = p99_svg(&[panel("text"), panel("binary")], 500.0);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert_eq!(svg.matches("p99 SLA 500 us").count(), 2);
        assert!(svg.contains(">binary: p99") && svg.contains(">ebbflow</text>"));
    }

    #[test]
    fn a_cdf_rises_to_one_over_the_sorted_samples() {
        assert_eq!(
            cdf_points(&[30.0, 10.0, 20.0, 40.0]),
            [(10.0, 0.25), (20.0, 0.5), (30.0, 0.75), (40.0, 1.0)]
        );
        let curve = Curve {
            label: "messenger".to_owned(),
            color: "#1f77b4".to_owned(),
            points: cdf_points(&[1.0, 2.0]),
        };
        let svg = cdf_svg("native to native", &[curve.clone(), curve]);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(">native to native: fraction"));
    }
}
