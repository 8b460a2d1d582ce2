//! `edgelimit rules check [wrangler.toml]`: a Worker's settings checked offline with the code and the messages the
//! Worker starts with ([`edgelimit::gate::config`]), so a broken rule is found before `wrangler deploy`.

use std::path::Path;
use std::process::ExitCode;

use edgelimit::RestClient;

/// Prints `<file>: 3 rules ok (login, api, site)` (exit 0) or the Worker's message (exit 1); a file that cannot be
/// read or is no TOML exits 2.
pub fn check(path: &Path) -> ExitCode {
    let file = path.display();
    let table = match std::fs::read_to_string(path).map(|text| text.parse::<toml::Table>()) {
        Ok(Ok(table)) => table,
        Ok(Err(e)) => return refused(format!("{file} is not valid TOML: {e}"), 2),
        Err(e) => return refused(format!("cannot read {file}: {e}"), 2),
    };
    let vars = serde_json::to_value(table.get("vars")).unwrap_or_default();
    // The endpoint and its token are read when the Worker starts (the token is a secret): a client never called
    // stands in for them.
    let placeholder = || RestClient::new("http://localhost", "placeholder");
    match edgelimit::gate::config::from_vars(&vars, placeholder) {
        Ok(gate) => {
            let names: Vec<&str> = gate.rule_names().collect();
            let plural = if names.len() == 1 { "" } else { "s" };
            println!("{file}: {} rule{plural} ok ({})", names.len(), names.join(", "));
            ExitCode::SUCCESS
        }
        Err(e) => refused(format!("{file}: {e}"), 1),
    }
}

fn refused(message: String, code: u8) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(code)
}
