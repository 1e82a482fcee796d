//! Word statistics, written to exercise the grammar queries.
use std::collections::HashMap;

pub struct Counter {
    counts: HashMap<String, usize>,
}

pub trait Summary {
    fn total(&self) -> usize;
    fn describe(&self) -> String {
        format!("{} words", self.total())
    }
}

impl Counter {
    pub fn new() -> Self {
        Counter { counts: HashMap::new() }
    }

    pub fn add(&mut self, text: &str) {
        for word in text.split_whitespace() {
            *self.counts.entry(word.to_lowercase()).or_insert(0) += 1;
        }
    }

    pub fn reset(&mut self) {}
}

impl Summary for Counter {
    fn total(&self) -> usize {
        self.counts.values().sum()
    }
}

pub fn most_common(counter: &Counter) -> Option<(&String, &usize)> {
    let by_count = |a: &(&String, &usize), b: &(&String, &usize)| {
        a.1.cmp(b.1)
    };
    counter.counts.iter().max_by(by_count)
}
