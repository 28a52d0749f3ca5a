// the user interface follows
