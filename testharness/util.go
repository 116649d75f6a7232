package testharness

import (
	"net/url"
	"strconv"
)

func portOf(u string) int {
	p, err := url.Parse(u)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p.Port())
	return n
}
