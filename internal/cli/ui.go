package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/secret"
)

// signInLink is the answer of POST /ui/codes.
type signInLink struct {
	URL       string `json:"url"`
	Path      string `json:"path"`
	ExpiresIn int    `json:"expiresIn"`
}

// signInWait is how long `cumulus ui` waits for the browser to come back.
const signInWait = 2 * time.Minute

func newUICmd(g *globals) *cobra.Command {
	var printURL bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the web studio in a browser, already signed in",
		Long: `Open the Cumulus web studio (served by 'cumulus serve' at its URL) in a
browser on this machine, signed in as the CLI's token. The browser first
visits the studio, which sends it back to a port this command listens on
(127.0.0.1); the command then gives it a one-time sign-in link that works
once, within 60 seconds, and only in that browser (a link opened anywhere
else signs nothing in). The token itself never appears in a link. With
--print-url the first address is printed instead of opened: open it in a
browser on this machine within two minutes. A browser elsewhere signs in
with a token on the studio's sign-in page.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return fmt.Errorf("listen on a loopback port for the browser: %w", err)
			}
			state := secret.NewToken("")
			done := make(chan error, 1)
			srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/callback" || r.URL.Query().Get("state") != state {
					http.Error(w, "cumulus ui: this is not the sign-in this command started", http.StatusBadRequest)
					return
				}
				var link signInLink
				if _, err := c.Do(r.Context(), http.MethodPost, "/ui/codes", map[string]string{"binding": r.URL.Query().Get("binding")}, &link); err != nil {
					http.Error(w, "cumulus ui: "+err.Error(), http.StatusBadGateway)
					select {
					case done <- err:
					default:
					}
					return
				}
				http.Redirect(w, r, c.Server()+link.Path, http.StatusFound)
				select {
				case done <- nil:
				default:
				}
			})}
			go func() { _ = srv.Serve(ln) }()
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx) // the browser's redirect is sent first
			}()
			begin := c.Server() + "/ui/login/begin?" + url.Values{"port": {strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)}, "state": {state}}.Encode()
			switch {
			case printURL:
				fmt.Fprintf(g.stderr, "Open this address in a browser on this machine within %s:\n", signInWait)
				fmt.Fprintln(g.stdout, begin)
			default:
				if err := openBrowser(begin); err != nil {
					fmt.Fprintf(g.stderr, "Could not open a browser (%v). Open this address in a browser on this machine within %s:\n", err, signInWait)
					fmt.Fprintln(g.stdout, begin)
				}
			}
			select {
			case err := <-done:
				if err != nil {
					return err
				}
			case <-time.After(signInWait):
				return fmt.Errorf("no browser came back within %s; run 'cumulus ui' again, or sign in with a token", signInWait)
			case <-cmd.Context().Done():
				return cmd.Context().Err()
			}
			fmt.Fprintf(g.stderr, "Signed the browser in to the Cumulus studio at %s/.\n", c.Server())
			return nil
		},
	}
	cmd.Flags().BoolVar(&printURL, "print-url", false, "print the sign-in address instead of opening a browser (open it in a browser on this machine)")
	return cmd
}

// openBrowser opens url with the desktop's browser ($BROWSER first). On a
// machine without a graphical display (an SSH session, a container) there
// is no browser to open, whatever launcher is installed; a launcher that
// fails soon (xdg-open finds no browser) is a failure too.
func openBrowser(url string) error {
	var name string
	var args []string
	switch {
	case os.Getenv("BROWSER") != "":
		name = os.Getenv("BROWSER")
	case runtime.GOOS == "darwin":
		name = "open"
	case runtime.GOOS == "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return errors.New("no graphical display: DISPLAY and WAYLAND_DISPLAY are unset; set $BROWSER to a command that opens a URL")
		}
		name = "xdg-open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return errors.New("no browser launcher found (" + name + "); set $BROWSER")
	}
	cmd := exec.Command(path, append(args, url)...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// A launcher hands the link to a browser and exits; one that is still
	// running after a while is the browser itself, kept in the foreground.
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s could not open it: %w", name, err)
		}
	case <-time.After(launcherWait):
	}
	return nil
}

// launcherWait is how long openBrowser waits for the launcher's verdict.
const launcherWait = 5 * time.Second
