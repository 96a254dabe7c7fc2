package api

import (
	"strconv"
	"strings"
)

// Data and code assets: versions of a named thing whose content is a
// path in the workspace's blob store (DataURI, CodeURI).

// DataVersion is a data asset version (…/data/{name}/versions/{version}).
type DataVersion struct {
	ID         string                `json:"id"`
	Name       string                `json:"name"`
	Type       string                `json:"type"`
	SystemData *SystemData           `json:"systemData,omitempty"`
	Properties DataVersionProperties `json:"properties"`
}

// DataVersionProperties is DataVersionBase (uri_file, uri_folder).
type DataVersionProperties struct {
	DataType    string            `json:"dataType"`
	DataURI     string            `json:"dataUri"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	Properties  map[string]string `json:"properties,omitempty"`
	IsAnonymous bool              `json:"isAnonymous"`
	IsArchived  bool              `json:"isArchived"`
}

// CodeVersion is a code asset version (…/codes/{name}/versions/{version}).
type CodeVersion struct {
	ID         string                `json:"id"`
	Name       string                `json:"name"`
	Type       string                `json:"type"`
	SystemData *SystemData           `json:"systemData,omitempty"`
	Properties CodeVersionProperties `json:"properties"`
}

// CodeVersionProperties is CodeVersion's properties.
type CodeVersionProperties struct {
	CodeURI           string            `json:"codeUri,omitempty"`
	Description       string            `json:"description,omitempty"`
	Tags              map[string]string `json:"tags,omitempty"`
	Properties        map[string]string `json:"properties,omitempty"`
	IsAnonymous       bool              `json:"isAnonymous"`
	IsArchived        bool              `json:"isArchived"`
	ProvisioningState string            `json:"provisioningState,omitempty"`
}

// AssetContainer is a data or code asset with its versions
// (DataContainer, CodeContainer).
type AssetContainer struct {
	ID         string                   `json:"id"`
	Name       string                   `json:"name"`
	Type       string                   `json:"type"`
	SystemData *SystemData              `json:"systemData,omitempty"`
	Properties AssetContainerProperties `json:"properties"`
}

// AssetContainerProperties says an asset's latest and next version.
type AssetContainerProperties struct {
	DataType      string `json:"dataType,omitempty"`
	Description   string `json:"description,omitempty"`
	IsArchived    bool   `json:"isArchived"`
	LatestVersion string `json:"latestVersion,omitempty"`
	NextVersion   string `json:"nextVersion,omitempty"`
	Versions      int    `json:"versionCount"` // a Cumulus extension
}

// Asset types.
const (
	TypeDataVersion   = Provider + "/workspaces/data/versions"
	TypeDataContainer = Provider + "/workspaces/data"
	TypeCodeVersion   = Provider + "/workspaces/codes/versions"
	TypeCodeContainer = Provider + "/workspaces/codes"

	DataURIFile   = "uri_file"
	DataURIFolder = "uri_folder"
)

// PendingUploadRequest is the body of startPendingUpload.
type PendingUploadRequest struct {
	PendingUploadID   string `json:"pendingUploadId,omitempty"`
	PendingUploadType string `json:"pendingUploadType,omitempty"`
}

// PendingUploadResponse is startPendingUpload's answer: a container the
// caller may write for a while, by SAS.
type PendingUploadResponse struct {
	BlobReferenceForConsumption BlobReferenceForConsumption `json:"blobReferenceForConsumption"`
	PendingUploadID             string                      `json:"pendingUploadId"`
	PendingUploadType           string                      `json:"pendingUploadType"`
}

// BlobReferenceForConsumption names the container and its SAS.
type BlobReferenceForConsumption struct {
	BlobURI             string                  `json:"blobUri"`
	StorageAccountArmID string                  `json:"storageAccountArmId"`
	Credential          PendingUploadCredential `json:"credential"`
}

// PendingUploadCredential is the SAS of a pending upload.
type PendingUploadCredential struct {
	CredentialType string `json:"credentialType"`
	SASURI         string `json:"sasUri"`
}

// PendingUploadTemporary is the upload type the SDKs ask for.
const PendingUploadTemporary = "TemporaryBlobReference"

// PrepareDataVersion validates a data asset version. Its dataUri must be
// a place in the workspace's blob store (ParseDataURI).
func PrepareDataVersion(d *DataVersion, name, version, account string) error {
	var v Validation
	if err := CheckAssetName("data name", name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	if err := CheckAssetName("data version", version); err != nil {
		v.Add(CodeInvalidName, "version", "%s", err)
	}
	p := &d.Properties
	switch strings.ToLower(p.DataType) {
	case DataURIFile, DataURIFolder:
		p.DataType = strings.ToLower(p.DataType)
	case "mltable":
		v.Add(CodeValidationError, "properties.dataType", "dataType mltable is not supported; register the folder as uri_folder")
	default:
		v.Add(CodeValidationError, "properties.dataType", "dataType %q is not one of uri_file, uri_folder", p.DataType)
	}
	if p.DataURI == "" {
		v.Add(CodeValidationError, "properties.dataUri", "dataUri is required: azureml://datastores/<datastore>/paths/<path>")
	} else if _, err := ParseDataURI(p.DataURI, account); err != nil {
		v.Add(CodeValidationError, "properties.dataUri", "%s", err)
	}
	checkTags(&v, p.Tags)
	return v.Err()
}

// PrepareCodeVersion validates a code asset version: its codeUri is a
// folder of the workspace's blob store (ParseDataURI).
func PrepareCodeVersion(c *CodeVersion, name, version, account string) error {
	var v Validation
	if err := CheckAssetName("code name", name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	if err := CheckAssetName("code version", version); err != nil {
		v.Add(CodeInvalidName, "version", "%s", err)
	}
	p := &c.Properties
	if p.CodeURI == "" {
		v.Add(CodeValidationError, "properties.codeUri", "codeUri is required: the folder the code was uploaded to (startPendingUpload answers where)")
	} else if _, err := ParseDataURI(p.CodeURI, account); err != nil {
		v.Add(CodeValidationError, "properties.codeUri", "%s", err)
	}
	p.ProvisioningState = "Succeeded"
	checkTags(&v, p.Tags)
	return v.Err()
}

// NextVersion is the version after the numeric versions given: one more
// than the largest, "1" for none.
func NextVersion(versions []string) string {
	best := 0
	for _, s := range versions {
		if n, err := strconv.Atoi(s); err == nil && n > best {
			best = n
		}
	}
	return strconv.Itoa(best + 1)
}
