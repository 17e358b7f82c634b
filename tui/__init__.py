"""rooftui.tui: the Textual app `rooftui` (the Explorer and the Results view)."""
