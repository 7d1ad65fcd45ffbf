//! OpenAI backend (to be written).
