//go:build !wasip1

package controller

// callArgs is for wasip1 hosts that start modules ahead of their calls;
// elsewhere os.Args and the environment are the call's from the start.
func callArgs() {}

// startedAhead is for the same hosts: elsewhere a module starts with its call.
func startedAhead() bool { return false }
