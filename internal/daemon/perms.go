package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
)

// privateEntries are what the control plane keeps in its data directory
// that no one but its owner may read: the store, its key, the admin
// token's CLI config, the TLS key, and the folders of blobs, logs,
// outputs and identity signing keys. (tls.crt is public; nodes/ belongs
// to the provider.)
var privateEntries = []string{
	"cumulus.db", "cumulus.db-wal", "cumulus.db-shm", "cumulus.db-journal",
	"secret.key", "config.yaml", "tls.key",
	"blobs", "logs", "outputs", "identity",
}

// secureDataDir takes group and other access away from the data directory
// and the private entries in it (directories 0700, files 0600 at most),
// and from the CLI config at configPath ("" for the one in dir). New
// files are made so already; this fixes a directory made beforehand (by
// mkdir, as a volume) and files of older versions, logging a warning
// that names each one fixed. An entry it cannot fix (not its owner) is
// logged, not fatal: the control plane still starts.
func secureDataDir(dir, configPath string, log *slog.Logger) {
	if runtime.GOOS == "windows" {
		return // no POSIX modes to fix
	}
	paths := []string{dir}
	for _, name := range privateEntries {
		paths = append(paths, filepath.Join(dir, name))
	}
	if configPath != "" && filepath.Clean(configPath) != filepath.Join(dir, "config.yaml") {
		paths = append(paths, configPath)
	}
	for i, p := range paths {
		was, now, err := tighten(p, i == 0) // a data dir that is a link: fix where it leads
		switch {
		case err != nil:
			log.Warn("data dir: cannot take group and other access away; fix it by hand", "path", p, "err", err)
		case was != now:
			log.Warn("data dir: took group and other access away", "path", p, "was", fmt.Sprintf("%04o", was), "now", fmt.Sprintf("%04o", now))
		}
	}
}

// tighten removes group and other permission bits from path (a missing
// path is no error). A symbolic link is followed only when follow is set,
// else left alone. It returns the mode before and after.
func tighten(path string, follow bool) (was, now fs.FileMode, err error) {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return 0, 0, nil
	}
	was = fi.Mode().Perm()
	now = was &^ 0o077
	if now == was {
		return was, now, nil
	}
	if err := os.Chmod(path, now); err != nil {
		return was, was, err
	}
	return was, now, nil
}
