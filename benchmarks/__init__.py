"""Speed and memory benchmarks of C2LLM; see benchmarks/README.md."""
