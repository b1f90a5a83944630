"""Speed and memory benchmarks of C2LLM (issue 5); see benchmarks/README.md."""
