package sdnotify

// StatusFromEnv returns a function that sets the service manager's status
// line (STATUS=), "starting" for "", for a wait before the server starts
// (the wall clock's). Outside systemd it does nothing; a malformed
// watchdog setting is reported where the watchdog starts (Follow).
func StatusFromEnv() func(string) {
	n, _ := FromEnv()
	return func(s string) {
		if s == "" {
			s = "starting"
		}
		_ = n.Send("STATUS=" + s)
	}
}
