"""Teaching: attention kinds, views of a translation, analysis and the figures the pages draw."""
