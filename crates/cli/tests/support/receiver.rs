//! A minimal HTTP receiver for the export tests: every request it gets (method, path, body)
//! is kept, and answered by a function of it.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Received {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A receiver on a free loopback port answering with `answer` (status, JSON body).
pub struct Receiver {
    pub url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub fn start(answer: impl Fn(&Received) -> (u16, String) + Send + Sync + 'static) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&received);
        let address = super::spawn_server(move |stream| {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut stream = stream;
            while let Some(request) = read(&mut reader) {
                let (status, body) = answer(&request);
                kept.lock().unwrap().push(request);
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                if stream.write_all(head.as_bytes()).is_err()
                    || stream.write_all(body.as_bytes()).is_err()
                {
                    return;
                }
            }
        });
        Receiver {
            url: format!("http://{address}"),
            received,
        }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn read(reader: &mut impl BufRead) -> Option<Received> {
    let mut request = Received {
        method: String::new(),
        path: String::new(),
        content_type: String::new(),
        body: Vec::new(),
    };
    let (mut length, mut line) = (0, String::new());
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if request.method.is_empty() {
            let mut parts = line.split(' ');
            request.method = parts.next().unwrap_or("").to_string();
            request.path = parts.next().unwrap_or("").to_string();
            continue;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
        if let Some(value) = lower.strip_prefix("content-type:") {
            request.content_type = value.trim().to_string();
        }
        if line == "\r\n" {
            break;
        }
    }
    request.body = vec![0; length];
    reader.read_exact(&mut request.body).unwrap();
    Some(request)
}
