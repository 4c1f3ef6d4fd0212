//! The dashboard's charts as geometry: stacked bars over time, one colour per value (an
//! authorization's outcome, a provider and failure kind, a service), with the totals behind
//! them. The template draws them as inline SVG (`templates/admin/chart.html`): no script, no
//! file from elsewhere, so they fit the pages' CSP (`crate::html::security_headers`).

use std::collections::BTreeMap;

use crate::clock::iso_time;
use crate::display::safe_text;
use crate::store::audit::HourCount;

/// The drawing's size in SVG units (it scales to the width it is given).
pub const WIDTH: u32 = 640;
pub const HEIGHT: u32 = 200;
/// Room for the y axis's numbers (left) and the x axis's times (below).
const LEFT: u32 = 44;
const BOTTOM: u32 = 22;
const TOP: u32 = 8;
/// Values with a colour of their own; the rest are added up as "other".
const MOST_VALUES: usize = 6;

/// Which stretch of time the dashboard shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// The last 24 hours, an hour per bar.
    Day,
    /// The last 7 days, six hours per bar.
    Week,
}

impl Range {
    pub fn parse(text: Option<&str>) -> Option<Self> {
        match text {
            None | Some("" | "24h") => Some(Range::Day),
            Some("7d") => Some(Range::Week),
            _ => None,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            Range::Day => "24h",
            Range::Week => "7d",
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Range::Day => "last 24 hours",
            Range::Week => "last 7 days",
        }
    }

    fn buckets(self) -> (i64, i64) {
        match self {
            Range::Day => (24, 3600),
            Range::Week => (28, 6 * 3600),
        }
    }

    /// The first second shown, and where each bar starts: the bars end with the current hour.
    pub fn window(self, now: i64) -> Window {
        let (count, width) = self.buckets();
        let end = now - now.rem_euclid(3600) + 3600;
        Window { start: end - count * width, count, width }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: i64,
    pub count: i64,
    /// Seconds per bar.
    pub width: i64,
}

impl Window {
    fn bucket(&self, hour: i64) -> Option<usize> {
        let index = (hour - self.start).div_euclid(self.width);
        (hour >= self.start && index < self.count).then_some(index as usize)
    }
}

/// One chart, ready to draw.
#[derive(Debug, Clone)]
pub struct Chart {
    /// The element id (`chart-ID`), for links and tests.
    pub id: &'static str,
    pub title: String,
    pub bars: Vec<Bar>,
    pub grid: Vec<Mark>,
    pub ticks: Vec<Mark>,
    /// Each value with its colour class and total, largest first.
    pub legend: Vec<Legend>,
    pub total: i64,
    /// Said when nothing was counted.
    pub empty: &'static str,
}

/// A rectangle, with the words a pointer shows (and a screen reader reads).
#[derive(Debug, Clone)]
pub struct Bar {
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
    pub class: String,
    pub title: String,
}

/// A labelled position: a grid line (`at` is y) or a time under the axis (`at` is x).
#[derive(Debug, Clone)]
pub struct Mark {
    pub at: u32,
    pub label: String,
}

#[derive(Debug, Clone)]
pub struct Legend {
    pub class: String,
    pub label: String,
    pub total: i64,
}

pub const PLOT_LEFT: u32 = LEFT;
pub const PLOT_RIGHT: u32 = WIDTH;
/// Where time labels sit (their baseline).
pub const TICK_Y: u32 = HEIGHT - 6;

/// A stacked-bar chart of `series`' counts in `window`, one colour per value that `value`
/// names for a count (safe text: values come from the database).
pub fn stacked(
    id: &'static str,
    title: String,
    counts: &[HourCount],
    series: &str,
    window: Window,
    value: impl Fn(&HourCount) -> String,
    empty: &'static str,
) -> Chart {
    // Per value, per bar.
    let mut by_value: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for c in counts.iter().filter(|c| c.series == series) {
        if let Some(bucket) = window.bucket(c.hour) {
            by_value.entry(safe_text(&value(c))).or_insert_with(|| vec![0; window.count as usize])[bucket] += c.n;
        }
    }
    let mut values: Vec<(String, Vec<i64>)> = by_value.into_iter().collect();
    values.sort_by_key(|(label, per_bar)| (std::cmp::Reverse(per_bar.iter().sum::<i64>()), label.clone()));
    if values.len() > MOST_VALUES {
        let rest = values.split_off(MOST_VALUES - 1);
        let mut other = vec![0; window.count as usize];
        for (_, per_bar) in rest {
            other.iter_mut().zip(per_bar).for_each(|(o, n)| *o += n);
        }
        values.push(("other".into(), other));
    }
    let legend: Vec<Legend> = values
        .iter()
        .enumerate()
        .map(|(i, (label, per_bar))| Legend {
            class: colour(label, i),
            label: label.clone(),
            total: per_bar.iter().sum(),
        })
        .collect();
    let stacks: Vec<i64> = (0..window.count as usize).map(|b| values.iter().map(|(_, v)| v[b]).sum()).collect();
    let top = nice_ceiling(stacks.iter().copied().max().unwrap_or(0));
    let plot_h = HEIGHT - BOTTOM - TOP;
    let slot = (WIDTH - LEFT) / window.count as u32;
    let bar_w = (slot * 3 / 4).max(1);
    let height_of = |n: i64| ((n as f64 / top as f64) * f64::from(plot_h)).round() as u32;
    let mut bars = Vec::new();
    for bucket in 0..window.count as usize {
        let x = LEFT + bucket as u32 * slot + (slot - bar_w) / 2;
        let mut base = HEIGHT - BOTTOM;
        let from = window.start + bucket as i64 * window.width;
        for ((label, per_bar), entry) in values.iter().zip(&legend) {
            let n = per_bar[bucket];
            if n == 0 {
                continue;
            }
            let h = height_of(n).max(1);
            base = base.saturating_sub(h);
            bars.push(Bar {
                x,
                y: base,
                w: bar_w,
                h,
                class: entry.class.clone(),
                title: format!("{label}: {n} from {} (UTC)", short_time(from)),
            });
        }
    }
    let grid = [0, top / 2, top]
        .into_iter()
        .map(|n| Mark { at: HEIGHT - BOTTOM - height_of(n), label: n.to_string() })
        .collect();
    let every = (window.count / 4).max(1);
    let ticks = (0..window.count)
        .step_by(every as usize)
        .map(|bucket| Mark {
            at: LEFT + bucket as u32 * slot + slot / 2,
            label: short_time(window.start + bucket * window.width),
        })
        .collect();
    Chart { id, title, bars, grid, ticks, total: legend.iter().map(|l| l.total).sum(), legend, empty }
}

/// A round number at or above `n` (1, 2 or 5 times a power of ten; at least 1) for the axis.
fn nice_ceiling(n: i64) -> i64 {
    let mut step = 1;
    loop {
        for k in [1, 2, 5] {
            if k * step >= n {
                return (k * step).max(1);
            }
        }
        step *= 10;
    }
}

/// `MM-DD HH:MM` in UTC.
fn short_time(at: i64) -> String {
    let iso = iso_time(at);
    iso.get(5..16).map_or(iso.clone(), |s| s.replace('T', " "))
}

/// The colour class of a value: fixed for an outcome (so green always means it worked), else
/// by rank.
fn colour(label: &str, rank: usize) -> String {
    match label {
        "completed" | "success" => "ok".into(),
        "declined" | "refused" => "warn".into(),
        "failed" | "failure" => "bad".into(),
        "expired" | "other" => "dim".into(),
        _ => format!("c{}", rank % MOST_VALUES),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(hour: i64, label: &str, n: i64) -> HourCount {
        HourCount { hour, series: "s".into(), label: label.into(), sub: String::new(), n }
    }

    #[test]
    fn the_window_ends_with_the_current_hour() {
        let w = Range::Day.window(10 * 3600 + 5);
        assert_eq!((w.start, w.count, w.width), (11 * 3600 - 24 * 3600, 24, 3600));
        assert_eq!(w.bucket(10 * 3600), Some(23));
        assert_eq!(w.bucket(w.start - 3600), None);
        assert_eq!(w.bucket(11 * 3600), None, "the future");
        assert_eq!(Range::Week.window(0).count, 28);
        assert_eq!(Range::parse(Some("7d")), Some(Range::Week));
        assert_eq!(Range::parse(Some("1y")), None);
    }

    #[test]
    fn bars_stack_per_hour_and_the_legend_holds_the_totals() {
        let now = 100 * 3600;
        let w = Range::Day.window(now);
        let counts = [count(now - 3600, "completed", 3), count(now - 3600, "failed", 1), count(now, "completed", 4)];
        let chart = stacked("a", "t".into(), &counts, "s", w, |c| c.label.clone(), "none");
        assert_eq!(chart.total, 8);
        let legend: Vec<_> = chart.legend.iter().map(|l| (l.label.as_str(), l.total, l.class.as_str())).collect();
        assert_eq!(legend, [("completed", 7, "ok"), ("failed", 1, "bad")]);
        assert_eq!(chart.bars.len(), 3);
        // The tallest stack (4) reaches a grid line at 5, and one stack's parts sit on each other.
        assert_eq!(chart.grid.last().unwrap().label, "5");
        let (a, b) = (&chart.bars[0], &chart.bars[1]);
        assert_eq!((a.x, a.y), (b.x, b.y + b.h));
        assert!(chart.bars.iter().all(|bar| bar.x + bar.w <= WIDTH && bar.y >= TOP));
        assert!(a.title.starts_with("completed: 3 from "), "{}", a.title);
    }

    #[test]
    fn many_values_fold_into_other_and_odd_text_is_escaped() {
        let now = 50 * 3600;
        let w = Range::Day.window(now);
        let counts: Vec<_> = (0..9).map(|i| count(now, &format!("svc{i}\u{202e}"), 10 - i)).collect();
        let chart = stacked("a", "t".into(), &counts, "s", w, |c| c.label.clone(), "none");
        assert_eq!(chart.legend.len(), MOST_VALUES);
        assert_eq!(chart.legend.last().unwrap().label, "other");
        assert_eq!(chart.total, (2..=10).sum::<i64>());
        assert!(chart.legend.iter().all(|l| !l.label.contains('\u{202e}')));
    }

    #[test]
    fn axis_tops_are_round() {
        assert_eq!([0, 1, 3, 7, 10, 11, 240, 999].map(nice_ceiling), [1, 1, 5, 10, 10, 20, 500, 1000]);
    }
}
