variable "name" {
  description = "Name of the S3 bucket holding Strata's segment objects (globally unique)."
  type        = string
}

variable "prefix" {
  description = "Key prefix under which Strata stores its objects (the path of the s3:// URL), without slashes at either end. Lets several clusters share a bucket."
  type        = string
  default     = "strata"

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$", var.prefix))
    error_message = "The prefix is one or more path segments of letters, digits, '.', '_' or '-', separated by single slashes, with no leading or trailing slash."
  }
}

variable "kms_key_arn" {
  description = "ARN of a customer-managed KMS key for SSE-KMS; null uses SSE-S3 (AES256), which costs nothing extra."
  type        = string
  default     = null
}

variable "abort_multipart_after_days" {
  description = "Days after which incomplete multipart uploads are aborted and their parts deleted (an interrupted upload of a large segment otherwise costs storage forever)."
  type        = number
  default     = 1
}

variable "versioning" {
  description = "Turn on bucket versioning: objects deleted (by the compactor, or by anyone holding its role) stay recoverable for noncurrent_version_days. Costs the storage of every compacted-away object for that long."
  type        = bool
  default     = false
}

variable "noncurrent_version_days" {
  description = "With versioning: days a deleted object's version is kept before a lifecycle rule expires it (longer than the time it would take to notice a bad deletion)."
  type        = number
  default     = 7

  validation {
    condition     = var.noncurrent_version_days >= 1
    error_message = "noncurrent_version_days must be at least 1."
  }
}

variable "force_destroy" {
  description = "Let terraform destroy the bucket even when it holds objects. Keep false in production: the objects are the data."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}
