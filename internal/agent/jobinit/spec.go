package jobinit

import (
	"errors"
	"strconv"
)

// Spec is what a job init is told, on its descriptor SpecFD: never on
// its command line, which any process of the machine may read in /proc
// (a job's command may carry secrets).
type Spec struct {
	// Ready: ReadyFD is a pipe on which to say that the command runs.
	Ready bool
	// Stdin: the command reads the init's standard input (an SSH
	// session's); else it reads nothing.
	Stdin bool
	// User, when set, is the job user to run the command as, isolated
	// (Mask, Tmp, ShmSize: see isolateJob); nil: the agent's user, not
	// isolated.
	User *User
	Mask string
	Tmp  string
	// KillAll: once the command has ended (and what a stop let it finish),
	// the init ends every other process of the job user (User): what left
	// the job's process group. Only for a job that is the one command of
	// its user on the node (its node runs one job at a time, one process
	// of it here); with several, the agent does it when all have ended.
	KillAll bool
	// ShmSize is the size of the job's /dev/shm in bytes.
	ShmSize int64
	Dir     string
	Path    string
	Args    []string // argv[1:]
}

// User is the job user as the job init is told it.
type User struct {
	UID  uint32
	GID  uint32
	Home string
}

// The spec on the wire: each field as its length in decimal, a colon and
// its bytes, in a fixed order (a version first), the arguments last after
// their count. Nothing in it needs escaping, and a field cannot run into
// the next. (Not JSON: encoding/json would make this package wait, in the
// program's init order, for packages it has no use for.)
const specVersion = "1"

// Encode is the spec as the job init reads it.
func (s Spec) Encode() []byte {
	var b []byte
	field := func(v string) {
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	flag := func(v bool) {
		if v {
			field("1")
		} else {
			field("0")
		}
	}
	field(specVersion)
	flag(s.Ready)
	flag(s.Stdin)
	flag(s.KillAll)
	flag(s.User != nil)
	if s.User != nil {
		field(strconv.FormatUint(uint64(s.User.UID), 10))
		field(strconv.FormatUint(uint64(s.User.GID), 10))
		field(s.User.Home)
	}
	field(s.Mask)
	field(s.Tmp)
	field(strconv.FormatInt(s.ShmSize, 10))
	field(s.Dir)
	field(s.Path)
	field(strconv.Itoa(len(s.Args)))
	for _, a := range s.Args {
		field(a)
	}
	return b
}

// errSpec is a spec that is not one Encode wrote.
var errSpec = errors.New("malformed job init spec")

// DecodeSpec reads what Encode wrote.
func DecodeSpec(b []byte) (Spec, error) {
	var s Spec
	field := func() (string, error) {
		n := 0
		for n < len(b) && b[n] != ':' {
			n++
		}
		l, err := strconv.Atoi(string(b[:n]))
		if n == len(b) || err != nil || l < 0 || l > len(b)-n-1 {
			return "", errSpec
		}
		v := string(b[n+1 : n+1+l])
		b = b[n+1+l:]
		return v, nil
	}
	flag := func() (bool, error) {
		v, err := field()
		if err != nil || (v != "0" && v != "1") {
			return false, errSpec
		}
		return v == "1", nil
	}
	number := func(bits int) (int64, error) {
		v, err := field()
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil || n < 0 {
			return 0, errSpec
		}
		return n, nil
	}
	if v, err := field(); err != nil || v != specVersion {
		return s, errSpec
	}
	var err error
	if s.Ready, err = flag(); err != nil {
		return s, err
	}
	if s.Stdin, err = flag(); err != nil {
		return s, err
	}
	if s.KillAll, err = flag(); err != nil {
		return s, err
	}
	hasUser, err := flag()
	if err != nil {
		return s, err
	}
	if hasUser {
		u := &User{}
		uid, err := number(33)
		if err != nil || uid > 1<<32-1 {
			return s, errSpec
		}
		gid, err := number(33)
		if err != nil || gid > 1<<32-1 {
			return s, errSpec
		}
		u.UID, u.GID = uint32(uid), uint32(gid)
		if u.Home, err = field(); err != nil {
			return s, err
		}
		s.User = u
	}
	for _, dst := range []*string{&s.Mask, &s.Tmp} {
		if *dst, err = field(); err != nil {
			return s, err
		}
	}
	if s.ShmSize, err = number(64); err != nil {
		return s, err
	}
	for _, dst := range []*string{&s.Dir, &s.Path} {
		if *dst, err = field(); err != nil {
			return s, err
		}
	}
	n, err := number(32)
	if err != nil {
		return s, err
	}
	for ; n > 0; n-- {
		a, err := field()
		if err != nil {
			return s, err
		}
		s.Args = append(s.Args, a)
	}
	if len(b) != 0 {
		return s, errSpec
	}
	return s, nil
}
