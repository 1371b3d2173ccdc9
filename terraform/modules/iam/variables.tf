variable "name" {
  description = "Name prefix of the IAM policies."
  type        = string
}

variable "bucket_arn" {
  description = "ARN of Strata's bucket."
  type        = string
}

variable "prefix" {
  description = "Key prefix Strata uses in the bucket (no slashes at either end)."
  type        = string
}

variable "kms_key_arn" {
  description = "ARN of the KMS key encrypting the bucket, when it uses SSE-KMS; null for SSE-S3."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}
