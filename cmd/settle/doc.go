// Command settle is the thin main of settle: flags, signals and wiring.
// main only turns signals into a cancelled context and errors into an exit
// code; Main.Run does the work, so end-to-end tests call it directly.
//
// Subcommands: demo (the whole story on an embedded server against a fake
// API). cmd may import every settle package; nothing imports cmd.
package main
