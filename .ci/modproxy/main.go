// Command modproxy writes modules of a checkout as a file-based Go module proxy serves
// them (GOPROXY=file://DIR), so that a module outside the repository can resolve them at a
// version that is not tagged yet, with no replace directive:
//
//	modproxy -version v0.1.0 -out DIR MODULE_DIR...
//
// For each module directory (one with a go.mod), it writes DIR/<escaped module path>/@v/
// list, VERSION.info, VERSION.mod and VERSION.zip, the zip made by golang.org/x/mod/zip
// as the go command makes it (nested modules and VCS directories left out).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

func main() {
	version := flag.String("version", "", "the version to serve the modules at, such as v0.1.0")
	out := flag.String("out", "", "the proxy's directory, created if missing")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: modproxy -version VERSION -out DIR MODULE_DIR...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*version, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(version, out string, dirs []string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("-version %q: want a canonical semantic version such as v0.1.0", version)
	}
	if out == "" || len(dirs) == 0 {
		return errors.New("need -out and at least one module directory")
	}
	for _, dir := range dirs {
		path, err := serve(version, out, dir)
		if err != nil {
			return fmt.Errorf("module in %s: %w", dir, err)
		}
		fmt.Printf("%s@%s from %s\n", path, version, dir)
	}
	return nil
}

// serve writes the module in dir at version into the proxy directory out, and returns
// the module's path.
func serve(version, out, dir string) (string, error) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return "", errors.New("go.mod has no module line")
	}
	// A major version above 1 must be in the path (/v2), or the go command refuses it.
	if err := module.Check(path, version); err != nil {
		return "", err
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return "", err
	}

	zipPath := filepath.Join(at, version+".zip")
	mv := module.Version{Path: path, Version: version}
	if err := writeZip(zipPath, mv, dir); err != nil {
		return "", err
	}
	// What the go command checks when it downloads the zip: read it back the same way.
	if _, err := modzip.CheckZip(mv, zipPath); err != nil {
		return "", fmt.Errorf("%s: %w", zipPath, err)
	}
	if err := os.WriteFile(filepath.Join(at, version+".mod"), gomod, 0o644); err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(at, version+".info"), info, 0o644); err != nil {
		return "", err
	}
	return path, addToList(filepath.Join(at, "list"), version)
}

func writeZip(name string, mv module.Version, dir string) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return modzip.CreateFromDir(f, mv, dir)
}

// addToList adds version to the proxy's list of the module's versions, once.
func addToList(name, version string) error {
	data, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(data))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(name, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}
