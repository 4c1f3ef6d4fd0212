//! The code's shape, checked: the module graph of `src/` points one way, and no test file imports
//! another; and measured: which source files one tool call walks through (`bench/call-path.sh`).

mod call_paths;
mod layers;
mod test_imports;
