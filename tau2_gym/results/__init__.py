"""Working with tau2 results files: rescoring, replay through fresh envs, and HTML reports."""
