//go:build !wasip1

package controller

// callArgs is for wasip1 hosts that start modules ahead of their calls;
// elsewhere os.Args and the environment are the call's from the start.
func callArgs() {}
