package web

// AllPass is a readiness check that passes when every check does.
func AllPass(checks []Check) func() error {
	return func() error {
		for _, c := range checks {
			if err := c.Check(); err != nil {
				return err
			}
		}
		return nil
	}
}

// CheckNamed returns the check called name, nil when there is none.
func CheckNamed(checks []Check, name string) func() error {
	for _, c := range checks {
		if c.Name == name {
			return c.Check
		}
	}
	return nil
}
