//! The little CSV trace files need: one record per line, comma-separated cells, optional
//! double quotes around a cell (`""` inside quotes is one quote). No multi-line cells.

/// The cells of one line; an error for an unterminated or misplaced quote.
pub(crate) fn split_line(line: &str) -> Result<Vec<String>, String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') if cell.trim().is_empty() && !was_quoted => {
                cell.clear();
                quoted = true;
                was_quoted = true;
            }
            (false, '"') => return Err(format!("a quote inside the unquoted cell `{cell}\"`")),
            (false, ',') => {
                cells.push(std::mem::take(&mut cell));
                was_quoted = false;
            }
            (false, c) => {
                if was_quoted && !c.is_whitespace() {
                    return Err("text after a closing quote".into());
                }
                cell.push(c);
            }
        }
    }
    if quoted {
        return Err("a quoted cell is not closed".into());
    }
    cells.push(cell);
    Ok(cells)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cells_split_on_commas_outside_quotes() {
        assert_eq!(split_line("a,b,,c").unwrap(), ["a", "b", "", "c"]);
        assert_eq!(
            split_line(r#"1,"GPT-4, turbo","say ""hi""""#).unwrap(),
            ["1", "GPT-4, turbo", r#"say "hi""#]
        );
        assert!(split_line(r#"1,"open"#).is_err());
        assert!(split_line(r#"1,ab"c"#).is_err());
        assert!(split_line(r#"1,"ab"c"#).is_err());
    }
}
