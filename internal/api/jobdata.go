package api

import "strings"

// Input and output modes, as the REST API spells them (the YAML's
// ro_mount, rw_mount, download, upload, direct are accepted too).
//
// Cumulus copies a folder or file input into the job's folder before the
// command starts (ReadOnlyMount and Download alike: the job sees a local
// copy), gives a Direct input's URI to the job as it is, and uploads an
// output folder to its datastore path when the job ends (Upload and
// ReadWriteMount alike: nothing is written to the datastore while the job
// runs). ReadWriteMount inputs (writing back into the datastore) and the
// mltable modes are refused.
const (
	ModeReadOnlyMount  = "ReadOnlyMount"
	ModeReadWriteMount = "ReadWriteMount"
	ModeDownload       = "Download"
	ModeUpload         = "Upload"
	ModeDirect         = "Direct"
	ModeEvalMount      = "EvalMount"
	ModeEvalDownload   = "EvalDownload"
)

// CanonicalMode spells a mode as the REST API does ("" for an unknown one).
func CanonicalMode(m string) string {
	switch strings.ToLower(strings.ReplaceAll(m, "_", "")) {
	case "readonlymount", "romount":
		return ModeReadOnlyMount
	case "readwritemount", "rwmount":
		return ModeReadWriteMount
	case "download":
		return ModeDownload
	case "upload":
		return ModeUpload
	case "direct":
		return ModeDirect
	case "evalmount":
		return ModeEvalMount
	case "evaldownload":
		return ModeEvalDownload
	}
	return ""
}

// checkInputMode normalises an input's mode, refusing those Cumulus does
// not put into effect.
func checkInputMode(v *Validation, name string, in *JobInput) {
	if in.Mode == "" {
		return
	}
	m := CanonicalMode(in.Mode)
	target := "properties.inputs." + name + ".mode"
	switch m {
	case ModeReadOnlyMount, ModeDownload, ModeDirect:
		in.Mode = m
	case ModeReadWriteMount:
		v.Add(CodeValidationError, target, "input %s: mode rw_mount is not supported: Cumulus copies inputs into the job's folder and writes nothing back to the datastore; use ro_mount or download, and an output for what the job writes", name)
	case ModeEvalMount, ModeEvalDownload:
		v.Add(CodeValidationError, target, "input %s: mode %s is for mltable inputs, which Cumulus does not support", name, in.Mode)
	default:
		v.Add(CodeValidationError, target, "input %s: mode %q is not one of ro_mount, download, direct", name, in.Mode)
	}
}

// checkOutputMode normalises an output's mode.
func checkOutputMode(v *Validation, name string, out *JobOutput) {
	if out.Mode == "" {
		return
	}
	m := CanonicalMode(out.Mode)
	switch m {
	case ModeUpload, ModeReadWriteMount:
		out.Mode = m
	default:
		v.Add(CodeValidationError, "properties.outputs."+name+".mode", "output %s: mode %q is not one of rw_mount, upload (both upload the folder to its datastore path when the job ends)", name, out.Mode)
	}
}

// DefaultOutputPath is where Azure puts a job's output that names no
// path: azureml/<job>/<output>/ in the default datastore.
func DefaultOutputPath(job, output string) BlobPath {
	return BlobPath{Datastore: DefaultDatastore, Path: "azureml/" + job + "/" + output + "/"}
}

// ArtifactPath is where a job's logs and default outputs are in the
// workspaceartifactstore datastore, as Azure lays them out.
func ArtifactPath(job string) string { return "ExperimentRun/dcid." + job + "/" }

// WithDefaultOutputs returns the outputs with each one that names no path
// given DefaultOutputPath(job, name) (a new map; the given one is not
// changed).
func WithDefaultOutputs(outs map[string]JobOutput, job string) map[string]JobOutput {
	if outs == nil {
		return nil
	}
	res := make(map[string]JobOutput, len(outs))
	for k, o := range outs {
		if o.URI == "" {
			b := DefaultOutputPath(job, k)
			o.URI, o.BlobPath = b.URI(), &b
		}
		res[k] = o
	}
	return res
}
