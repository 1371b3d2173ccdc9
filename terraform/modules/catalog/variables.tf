variable "name" {
  description = "Name of the database (instance or cluster identifier) and prefix of its related resources."
  type        = string
}

variable "engine" {
  description = "\"rds\" for RDS for PostgreSQL Multi-AZ (a standby in another AZ, synchronous replication), or \"aurora-serverless\" for Aurora PostgreSQL Serverless v2 with a writer and a reader in two AZs (storage replicated synchronously across three AZs). Offsets live only in the catalog: both replicate synchronously."
  type        = string
  default     = "rds"

  validation {
    condition     = contains(["rds", "aurora-serverless"], var.engine)
    error_message = "engine must be \"rds\" or \"aurora-serverless\"."
  }
}

variable "postgres_version" {
  description = "PostgreSQL major.minor version (RDS engine_version, or Aurora PostgreSQL's)."
  type        = string
  default     = "16.8"
}

variable "instance_class" {
  description = "RDS instance class (engine = \"rds\"). db.t4g.micro suits trials; commits are short single round trips, so a small instance carries a busy writer."
  type        = string
  default     = "db.t4g.micro"
}

variable "allocated_storage_gb" {
  description = "RDS gp3 storage in GiB (engine = \"rds\"). The catalog holds rows per segment chunk, not record data."
  type        = number
  default     = 20
}

variable "aurora_min_acu" {
  description = "Aurora Serverless v2 minimum capacity in ACUs (engine = \"aurora-serverless\"); 0 lets an idle cluster pause (not while RDS Proxy holds connections)."
  type        = number
  default     = 0.5
}

variable "aurora_max_acu" {
  description = "Aurora Serverless v2 maximum capacity in ACUs (engine = \"aurora-serverless\")."
  type        = number
  default     = 4
}

variable "database_name" {
  description = "Name of the database Strata uses."
  type        = string
  default     = "strata"
}

variable "username" {
  description = "Master user name. Its password is generated and kept in Secrets Manager."
  type        = string
  default     = "strata"
}

variable "vpc_id" {
  description = "VPC of the database."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets, in at least two availability zones, for the database (and the proxy)."
  type        = list(string)
}

variable "client_security_group_ids" {
  description = "Security groups of Strata's nodes (tasks or functions) allowed to connect on 5432."
  type        = list(string)
}

variable "enable_proxy" {
  description = "Put RDS Proxy in front of the database: for Lambda, whose many short-lived sandboxes would otherwise exhaust connections. Strata's Lambda entry point uses default_query_exec_mode=exec so statements do not pin proxy sessions."
  type        = bool
  default     = false
}

variable "ca_bundle_path" {
  description = "Path, inside the node's image, of the RDS CA bundle that verifies the database's certificate (the repository's Dockerfile puts the global bundle there). Not used through RDS Proxy, whose certificate the system roots verify."
  type        = string
  default     = "/etc/strata/rds-global-bundle.pem"
}

variable "backup_retention_days" {
  description = "Days of automated backups (point-in-time recovery)."
  type        = number
  default     = 7
}

variable "deletion_protection" {
  description = "Refuse to delete the database (turn off to destroy a trial)."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}
