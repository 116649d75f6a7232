package apiclient

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
)

// A password in --api never reaches what the CLI prints: neither the
// error of a server it cannot reach, nor the hint that names the address,
// nor the refusal of an address that is not http(s).
func TestTheAPIURLsPasswordIsNeverPrinted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing answers there
	c, err := New("http://ops:s3cret-pw@"+addr, "SETTLE_TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(context.Background(), "GET", "/v1/intents", nil)
	if err == nil {
		t.Fatal("no error from an address nothing answers")
	}
	printed := err.Error() + "\n" + strings.Join(errors.GetAllHints(err), "\n")
	if strings.Contains(printed, "s3cret-pw") {
		t.Fatalf("the password is printed:\n%s", printed)
	}
	if !strings.Contains(printed, addr) {
		t.Fatalf("the address is not named:\n%s", printed)
	}
	_, err = New("ftp://ops:s3cret-pw@"+addr, "SETTLE_TOKEN")
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "--api") {
		t.Fatalf("refusing an ftp URL: %v", err)
	}
}
