"""Collecting many episodes: one collect core (select, resume, log, summary) run in-process or on Ray actors."""
