"""The recurrence buffer: weak signals wait here until enough distinct sessions repeat them
within a window, or the user confirms them (`rules` decides, `candidates` stores and logs)."""
