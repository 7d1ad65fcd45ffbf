//! The journal: `requests.jsonl`, one [`RequestRecord`] per line, appended and flushed as each
//! request finishes, so an interrupted or crashed run keeps every finished request and its
//! report can be rebuilt. Reading tolerates a torn last line.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::record::RequestRecord;

/// Appends records to a journal file.
#[derive(Debug)]
pub struct JournalWriter {
    path: PathBuf,
    file: BufWriter<File>,
    line: Vec<u8>,
}

impl JournalWriter {
    /// Creates (or truncates) the journal at `path`.
    pub fn create(path: &Path) -> io::Result<Self> {
        Ok(JournalWriter {
            path: path.to_path_buf(),
            file: BufWriter::new(File::create(path)?),
            line: Vec::new(),
        })
    }

    /// Where the journal is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record and flushes it to the operating system.
    pub fn append(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, record).map_err(io::Error::other)?;
        self.line.push(b'\n');
        self.file.write_all(&self.line)?;
        self.file.flush()
    }

    /// Flushes and syncs the file to disk.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.get_ref().sync_data()
    }
}

/// A journal line that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file could not be opened or read.
    #[error("cannot read journal {path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: io::Error,
    },
    /// A line is not a request record.
    #[error("{path}:{line}: not a request record: {message}")]
    BadLine {
        /// File.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What the parser said.
        message: String,
    },
}

/// Everything read from a journal.
#[derive(Debug, Default)]
pub struct JournalContents {
    /// The records, in file order.
    pub records: Vec<RequestRecord>,
    /// Whether the last line was torn (cut mid-write) and skipped.
    pub torn_last_line: bool,
}

/// Reads a whole journal. A malformed line is an error naming the line, except an unterminated
/// last line (a write cut short by a crash), which is skipped and reported.
pub fn read_journal(path: &Path) -> Result<JournalContents, JournalError> {
    let display = path.display().to_string();
    let io_error = |source| JournalError::Io {
        path: display.clone(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(io_error)?);
    let mut contents = JournalContents::default();
    let mut buffer = String::new();
    let mut number = 0;
    loop {
        buffer.clear();
        let read = reader.read_line(&mut buffer).map_err(io_error)?;
        if read == 0 {
            break;
        }
        number += 1;
        let line = buffer.trim();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<RequestRecord>(line) {
            Ok(record) => contents.records.push(record),
            Err(_) if !buffer.ends_with('\n') => contents.torn_last_line = true,
            Err(error) => {
                return Err(JournalError::BadLine {
                    path: display,
                    line: number,
                    message: error.to_string(),
                });
            }
        }
    }
    Ok(contents)
}
