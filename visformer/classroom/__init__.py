"""Running the app for a class: hosting limits, student input, archives, background jobs, the checkpoint catalogue."""
