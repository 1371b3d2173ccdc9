variable "region" {
  description = "AWS region to deploy in."
  type        = string
}

variable "name" {
  description = "Name of this deployment, prefixing every resource (lowercase letters, digits and hyphens)."
  type        = string
  default     = "strata"
}

variable "bucket_name" {
  description = "Name of the S3 bucket to create (globally unique)."
  type        = string
}

variable "vpc_id" {
  description = "VPC to deploy into."
  type        = string
}

variable "private_subnet_ids" {
  description = "Private subnets in at least two AZs, for the functions, the database and RDS Proxy."
  type        = list(string)
}

variable "route_table_ids" {
  description = "Route tables of the private subnets: a free S3 gateway endpoint is added to them so the functions reach S3 without NAT. Empty: the VPC already routes to S3."
  type        = list(string)
  default     = []
}

variable "package_file" {
  description = "Path of the Lambda zip (deploy/build-lambda.sh arm64 writes bin/strata-lambda-arm64.zip)."
  type        = string
}

variable "architecture" {
  description = "arm64 or x86_64, as the package was built."
  type        = string
  default     = "arm64"
}

variable "frontend" {
  description = "\"http_api\" (API Gateway HTTP API) or \"function_url\"."
  type        = string
  default     = "http_api"
}

variable "function_url_streaming" {
  description = "With frontend = \"function_url\": stream responses, so Server-Sent Events tails work."
  type        = bool
  default     = false
}

variable "catalog_engine" {
  description = "\"rds\" (RDS PostgreSQL Multi-AZ) or \"aurora-serverless\" (Aurora Serverless v2)."
  type        = string
  default     = "rds"
}

variable "deletion_protection" {
  description = "Protect the database from deletion; set false to be able to destroy a trial."
  type        = bool
  default     = true
}

variable "bucket_versioning" {
  description = "Keep deleted segment objects recoverable for a week (bucket versioning with a lifecycle rule expiring old versions); costs a week of compacted-away storage."
  type        = bool
  default     = false
}
