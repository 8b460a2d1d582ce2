//! The progress bar on stderr; draws nothing when stderr is not a terminal.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One bar, reset at every scenario.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar on stderr when `visible`, otherwise one that draws nothing.
    pub fn new(visible: bool) -> Progress {
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(0), target);
        bar.set_style(
            ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {prefix}: {msg}")
                .expect("the template is valid"),
        );
        // Redraws the elapsed time while one long step (a Node driver) runs.
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress { bar }
    }

    /// Starts `scenario`, which will take `steps` steps.
    pub fn scenario(&self, scenario: &str, steps: u64) {
        self.bar.set_prefix(scenario.to_owned());
        self.bar.set_message("");
        self.bar.set_length(steps);
        self.bar.set_position(0);
    }

    /// Says what the current step measures.
    pub fn doing(&self, what: impl Into<String>) {
        self.bar.set_message(what.into());
    }

    /// One step of the current scenario done.
    pub fn step(&self) {
        self.bar.inc(1);
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
