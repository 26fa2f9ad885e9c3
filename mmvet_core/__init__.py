"""MM-Vet Grader core: official-parity MM-Vet grading with an LLM judge (no Gradio in here)."""
