//! The results: one row per metric, one cell per server, staunch's ratio to each peer, the
//! DESIGN.md target and whether staunch meets it. Printed as a text table, written as
//! Markdown and JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::servers::Kind;

/// Which way is better, for the ratio's reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// Not a quantity (yes/no, a description): no ratio.
    Neither,
}

#[derive(Clone, Debug)]
pub struct Cell {
    pub text: String,
    pub value: Option<f64>,
}

impl Cell {
    pub fn num(value: f64, text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            value: Some(value),
        }
    }

    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            value: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Row {
    pub key: String,
    pub label: String,
    pub better: Better,
    pub cells: BTreeMap<Kind, Cell>,
    /// The DESIGN.md target for staunch and the verdict, when this row has one.
    pub target: Option<String>,
    pub verdict: Option<bool>,
}

#[derive(Default, Debug)]
pub struct Report {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub kinds: Vec<Kind>,
}

impl Report {
    /// Sets a cell, creating the row (in first-seen order) when needed.
    pub fn set(&mut self, key: &str, label: &str, better: Better, kind: Kind, cell: Cell) {
        let row = match self.rows.iter().position(|r| r.key == key) {
            Some(i) => &mut self.rows[i],
            None => {
                self.rows.push(Row {
                    key: key.to_string(),
                    label: label.to_string(),
                    better,
                    cells: BTreeMap::new(),
                    target: None,
                    verdict: None,
                });
                self.rows.last_mut().expect("just pushed")
            }
        };
        row.cells.insert(kind, cell);
    }

    /// Orders the rows as DESIGN.md's Targets table does (stable: stdio before HTTP).
    pub fn sort_rows(&mut self) {
        const ORDER: [&str; 20] = [
            "cancel.stop",
            "cancel.late_progress",
            "cancel.response",
            "cancel.sse_close",
            "mem.survive",
            "ping",
            "tput",
            "mem.idle",
            "mem.per_call",
            "mem.after_cancel",
            "mem.leak",
            "resume",
            "flood",
            "m26.close",
            "m26.tput",
            "m26.mem.idle",
            "m26.mem.per_call",
            "m26.mem.after_close",
            "m26.mem",
            "",
        ];
        let rank = |k: &str| {
            ORDER
                .iter()
                .position(|p| k.starts_with(p))
                .unwrap_or(ORDER.len())
        };
        self.rows.sort_by_key(|r| rank(&r.key));
    }

    pub fn get(&self, key: &str, kind: Kind) -> Option<&Cell> {
        self.rows.iter().find(|r| r.key == key)?.cells.get(&kind)
    }

    pub fn value(&self, key: &str, kind: Kind) -> Option<f64> {
        self.get(key, kind)?.value
    }

    pub fn set_target(&mut self, key: &str, target: &str, verdict: Option<bool>) {
        if let Some(r) = self.rows.iter_mut().find(|r| r.key == key) {
            r.target = Some(target.to_string());
            r.verdict = verdict;
        }
    }

    /// A peer cell's text with staunch's ratio to it (staunch ÷ peer).
    fn cell_text(&self, row: &Row, kind: Kind) -> String {
        let Some(c) = row.cells.get(&kind) else {
            return "n/a".into();
        };
        if matches!(kind, Kind::Staunch | Kind::StaunchMem | Kind::StaunchB)
            || row.better == Better::Neither
        {
            return c.text.clone();
        }
        let s = row.cells.get(&Kind::Staunch).and_then(|c| c.value);
        match (s, c.value) {
            // Ratios of signed quantities (RSS growth can shrink) mean nothing.
            (Some(s), Some(p)) if p > 0.0 && s >= 0.0 && s.is_finite() && p.is_finite() => {
                format!("{} (×{})", c.text, ratio(s / p))
            }
            _ => c.text.clone(),
        }
    }

    fn verdict_text(row: &Row) -> String {
        match (&row.target, row.verdict) {
            (Some(t), Some(true)) => format!("meets: {t}"),
            (Some(t), Some(false)) => format!("**misses**: {t}"),
            (Some(t), None) => format!("not measured: {t}"),
            (None, _) => String::new(),
        }
    }

    /// The Markdown table.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = write!(s, "| metric |");
        for k in &self.kinds {
            let _ = write!(s, " {} |", k.title());
        }
        let _ = writeln!(s, " DESIGN target (staunch) |");
        let _ = write!(s, "|---|");
        for _ in &self.kinds {
            let _ = write!(s, "---|");
        }
        let _ = writeln!(s, "---|");
        for row in &self.rows {
            let _ = write!(s, "| {} |", row.label);
            for k in &self.kinds {
                let _ = write!(s, " {} |", self.cell_text(row, *k).replace('|', "\\|"));
            }
            let _ = writeln!(s, " {} |", Self::verdict_text(row));
        }
        s
    }

    /// A plain-text table for the terminal.
    pub fn text(&self) -> String {
        let mut cols: Vec<Vec<String>> = Vec::new();
        let mut head = vec!["metric".to_string()];
        head.extend(self.kinds.iter().map(|k| k.title().to_string()));
        head.push("target".into());
        cols.push(head);
        for row in &self.rows {
            let mut line = vec![row.label.clone()];
            line.extend(self.kinds.iter().map(|k| self.cell_text(row, *k)));
            line.push(match row.verdict {
                Some(true) => "meets".into(),
                Some(false) => "MISSES".into(),
                None => String::new(),
            });
            cols.push(line);
        }
        let n = cols[0].len();
        let widths: Vec<usize> = (0..n)
            .map(|i| cols.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        let mut s = String::new();
        for r in &cols {
            for (i, c) in r.iter().enumerate() {
                let pad = widths[i] - c.chars().count();
                let _ = write!(s, "{c}{}  ", " ".repeat(pad));
            }
            s.push('\n');
        }
        s
    }

    pub fn json(&self, meta: Value) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let cells: serde_json::Map<String, Value> = r
                    .cells
                    .iter()
                    .map(|(k, c)| {
                        (
                            k.key().to_string(),
                            json!({"text": c.text, "value": c.value}),
                        )
                    })
                    .collect();
                json!({
                    "key": r.key, "label": r.label,
                    "better": format!("{:?}", r.better).to_lowercase(),
                    "cells": cells, "target": r.target, "meets_target": r.verdict,
                })
            })
            .collect();
        json!({"meta": meta, "rows": rows, "notes": self.notes})
    }
}

fn ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else if r >= 0.1 {
        format!("{r:.2}")
    } else {
        format!("{r:.3}")
    }
}
