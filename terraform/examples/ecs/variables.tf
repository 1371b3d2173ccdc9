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

variable "image" {
  description = "Strata image built from the repository's Dockerfile and pushed to a registry the tasks can pull from (ECR)."
  type        = string
}

variable "cpu_architecture" {
  description = "ARM64 or X86_64, as the image was built."
  type        = string
  default     = "ARM64"
}

variable "vpc_id" {
  description = "VPC to deploy into."
  type        = string
}

variable "private_subnet_ids" {
  description = "Private subnets in at least two AZs for the tasks and the database; they need a route to ECR, S3, Secrets Manager and CloudWatch Logs (NAT or VPC endpoints)."
  type        = list(string)
}

variable "public_subnet_ids" {
  description = "Public subnets in at least two AZs for the load balancer."
  type        = list(string)
}

variable "certificate_arn" {
  description = "ACM certificate for HTTPS on the load balancer (required unless allow_plain_http)."
  type        = string
  default     = null
}

variable "allow_plain_http" {
  description = "Serve plain HTTP on port 80 as well (or instead, without certificate_arn): trials only, API keys cross the network in clear."
  type        = bool
  default     = false
}

variable "allowed_cidrs" {
  description = "CIDR blocks allowed to reach the load balancer."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "catalog_engine" {
  description = "\"rds\" (RDS PostgreSQL Multi-AZ) or \"aurora-serverless\" (Aurora Serverless v2)."
  type        = string
  default     = "rds"
}

variable "min_nodes" {
  description = "Fewest node tasks."
  type        = number
  default     = 2
}

variable "max_nodes" {
  description = "Most node tasks."
  type        = number
  default     = 10
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

variable "kafka" {
  description = "Serve Kafka clients too, behind a Network Load Balancer on 9092 (shared-address mode; TLS with certificate_arn)."
  type        = bool
  default     = false
}

variable "kafka_host" {
  description = "Host name Kafka clients use for the Network Load Balancer (a DNS alias the certificate covers); default the balancer's own DNS name."
  type        = string
  default     = null
}
